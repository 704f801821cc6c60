// Package patch installs a host's package updates with the host's own
// package manager (apt, dnf), from the host's own configured and signed
// repositories: what a patch campaign runs on each node, drained, under
// its lock. The first node resolves the set of versions to install; every
// later node installs exactly that set, and stops on anything outside it.
package patch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path"
	"slices"
	"strings"

	"github.com/kustodian/kustodian/internal/rollout"
)

// Spec says what a campaign installs (a MaintenanceRollout's spec.patch).
type Spec = rollout.PatchSpec

// Package is a change of one package: From is the version before ("": it
// was not installed), To the version after.
type Package = rollout.PackageChange

// Candidate is an update the repositories offer: a package change, where
// it comes from (the release it is in, as the manager names it), and
// whether it is a security update (apt: from a security archive; dnf: a
// security advisory names it).
type Candidate struct {
	Package
	Release  string
	Security bool
}

// Manager is a host's package manager.
type Manager interface {
	// Name is the manager's name (apt, dnf).
	Name() string
	// Refresh reads the repositories' indexes again.
	Refresh(ctx context.Context) error
	// Updates are the updates the repositories offer now, with the new
	// packages they need.
	Updates(ctx context.Context) ([]Candidate, error)
	// Simulate says what installing exactly these versions would change,
	// every package it would install or upgrade and where from, without
	// changing anything; a downgrade, a removal or a held package is an
	// error.
	Simulate(ctx context.Context, set []Package) ([]Candidate, error)
	// Newer says whether version a is newer than version b.
	Newer(ctx context.Context, a, b string) (bool, error)
	// Install installs exactly these versions.
	Install(ctx context.Context, set []Package) error
	// Installed are the versions installed now, by name.
	Installed(ctx context.Context) (map[string]string, error)
	// Keep puts what Restore needs to bring changes back in dir, as far
	// as the repositories and caches have it; it returns the packages it
	// could not keep.
	Keep(ctx context.Context, dir string, changes []Package) ([]string, error)
	// Restore brings every change back: the From versions installed
	// again, the packages that were new removed.
	Restore(ctx context.Context, dir string, changes []Package) error
	// RebootRequired says whether the host needs a reboot for what was
	// installed (changes among it), and why.
	RebootRequired(ctx context.Context, changes []Package) (bool, string, error)
}

// Select is the candidates s picks, as changes.
func Select(s Spec, cands []Candidate) []Package {
	var out []Package
	for _, c := range cands {
		if Picks(s, c) {
			out = append(out, c.Package)
		}
	}
	return out
}

// Picks says whether s installs c.
func Picks(s Spec, c Candidate) bool {
	if s.Updates == rollout.UpdatesSecurity && !c.Security {
		return false
	}
	return LeftOut(s, c.Name) == ""
}

// LeftOut is why s leaves the package name out ("" when it does not).
func LeftOut(s Spec, name string) string {
	if len(s.Include) > 0 && !slices.ContainsFunc(s.Include, func(p string) bool { return match(p, name) }) {
		return "spec.patch.include does not name it"
	}
	if i := slices.IndexFunc(s.Exclude, func(p string) bool { return match(p, name) }); i >= 0 {
		return fmt.Sprintf("spec.patch.exclude names it (%q)", s.Exclude[i])
	}
	return ""
}

func match(pattern, name string) bool {
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}

// IsSecurity says whether an apt release is a security one. apt names each
// archive that has a version as LABEL:VERSION/ARCHIVE, several joined by
// ", " (Debian:12.5/stable, Debian-Security:12/stable-security); one whose
// archive is a -security suite, or whose label is Debian-Security, is.
func IsSecurity(release string) bool {
	for _, r := range strings.Split(release, ", ") {
		label, rest, _ := strings.Cut(r, ":")
		archive := rest[strings.LastIndexByte(rest, '/')+1:]
		if strings.HasSuffix(archive, "-security") || label == "Debian-Security" {
			return true
		}
	}
	return false
}

// ForHost is this host's package manager, its commands' output going to
// log; an error says why this host cannot run patch campaigns.
func ForHost(log io.Writer) (Manager, error) {
	if _, err := exec.LookPath("apt-get"); err == nil {
		return NewApt(log), nil
	}
	if _, err := exec.LookPath("dnf"); err == nil {
		d := NewDnf(log)
		if _, err := d.python(); err != nil {
			return nil, err
		}
		return d, nil
	}
	return nil, errors.New("this host has no package manager Kustodian knows (apt-get, dnf 4)")
}
