// Package patch installs a host's package updates with the host's own
// package manager (apt, dnf), from the host's own configured and signed
// repositories: what a patch campaign runs on each node, drained, under
// its lock. The first node resolves the set of versions to install; every
// later node installs exactly that set, and stops on anything outside it.
package patch

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// Which updates a campaign installs.
const (
	UpdatesAll      = "all"
	UpdatesSecurity = "security"
)

// When a campaign's node reboots.
const (
	RebootIfRequired = "ifRequired"
	RebootNever      = "never"
)

// Spec says what a campaign installs: every update the repositories offer,
// or the security ones only, narrowed by Include (none: every package) and
// Exclude (shell patterns of package names, as path.Match reads them).
type Spec struct {
	Updates string   `json:"updates,omitempty"`
	Include []string `json:"include,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
	Reboot  string   `json:"reboot,omitempty"`
}

// Package is a change of one package: From is the version before ("": it
// was not installed), To the version after.
type Package struct {
	Name string `json:"name"`
	From string `json:"from,omitempty"`
	To   string `json:"to"`
}

// Candidate is an update the repositories offer: a package change and
// where it comes from (the release it is in, as the manager names it).
type Candidate struct {
	Package
	Release string
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
	// every package it would install or upgrade, without changing
	// anything.
	Simulate(ctx context.Context, set []Package) ([]Package, error)
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
	// installed, and why.
	RebootRequired(ctx context.Context) (bool, string, error)
}

// Select is the candidates s picks, as changes.
func Select(s Spec, cands []Candidate) []Package {
	var out []Package
	for _, c := range cands {
		if s.Picks(c) {
			out = append(out, c.Package)
		}
	}
	return out
}

// Picks says whether s installs c.
func (s Spec) Picks(c Candidate) bool {
	if s.Updates == UpdatesSecurity && !IsSecurity(c.Release) {
		return false
	}
	return s.Names(c.Name) == ""
}

// Names is why s leaves the package name out ("" when it does not).
func (s Spec) Names(name string) string {
	if len(s.Include) > 0 && !slices.ContainsFunc(s.Include, func(p string) bool { return match(p, name) }) {
		return "spec.patch.include does not name it"
	}
	if i := slices.IndexFunc(s.Exclude, func(p string) bool { return match(p, name) }); i >= 0 {
		return fmt.Sprintf("spec.patch.exclude names it (%q)", s.Exclude[i])
	}
	return ""
}

// pattern is what a package name pattern may hold: Debian's and RPM's
// name characters and the shell's wildcards.
var pattern = regexp.MustCompile(`^[A-Za-z0-9.+_:*?\[\]!^-]{1,128}$`)

func match(pattern, name string) bool {
	ok, err := path.Match(pattern, name)
	return err == nil && ok
}

// IsSecurity says whether a release is a security one: Debian's and
// Ubuntu's security suites (bookworm-security, jammy-security), and
// dnf's advisories of type security, name it so.
func IsSecurity(release string) bool {
	return strings.Contains(strings.ToLower(release), "security")
}

// Validate lists the problems of a spec, naming each field under prefix.
func (s Spec) Validate(prefix string) []error {
	var errs []error
	switch s.Updates {
	case "", UpdatesAll, UpdatesSecurity:
	default:
		errs = append(errs, fmt.Errorf("%s.updates: %q: want all or security", prefix, s.Updates))
	}
	switch s.Reboot {
	case "", RebootIfRequired, RebootNever:
	default:
		errs = append(errs, fmt.Errorf("%s.reboot: %q: want ifRequired or never", prefix, s.Reboot))
	}
	for _, f := range []struct {
		name     string
		patterns []string
	}{{"include", s.Include}, {"exclude", s.Exclude}} {
		for i, p := range f.patterns {
			if !pattern.MatchString(p) {
				errs = append(errs, fmt.Errorf("%s.%s[%d]: %q is not a pattern of package names (letters, digits, '.', '+', '-', ':', and * ? [...])", prefix, f.name, i, p))
			} else if _, err := path.Match(p, ""); err != nil {
				errs = append(errs, fmt.Errorf("%s.%s[%d]: %q: %v", prefix, f.name, i, p, err))
			}
		}
	}
	return errs
}
