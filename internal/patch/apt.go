package patch

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Apt is the package manager of Debian and Ubuntu hosts: apt-get and
// dpkg, with the host's own sources and keys.
type Apt struct {
	Run Runner
	// Cache is apt's archive cache (/var/cache/apt/archives): a
	// rollback finds old versions there too.
	Cache string
	// Sentinel is the file Debian's packages leave when the host needs
	// a reboot (/run/reboot-required).
	Sentinel string
}

// NewApt is the host's apt.
func NewApt(run Runner) *Apt {
	return &Apt{Run: run, Cache: "/var/cache/apt/archives", Sentinel: "/run/reboot-required"}
}

// aptEnv keeps apt and dpkg from asking anything: a configuration file
// the admin changed stays, the package's new one is put beside it.
var aptEnv = []string{"DEBIAN_FRONTEND=noninteractive", "APT_LISTCHANGES_FRONTEND=none", "NEEDRESTART_MODE=l"}

var aptOpts = []string{"-q", "-y", "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold"}

// Name is apt.
func (a *Apt) Name() string { return "apt" }

// Refresh runs apt-get update.
func (a *Apt) Refresh(ctx context.Context) error {
	_, err := a.Run(ctx, aptEnv, "apt-get", "-q", "update")
	return err
}

// Updates simulates an upgrade that installs the new packages it needs
// and removes none (apt-get upgrade --with-new-pkgs).
func (a *Apt) Updates(ctx context.Context) ([]Candidate, error) {
	out, err := a.Run(ctx, aptEnv, "apt-get", "-s", "-q", "--with-new-pkgs", "upgrade")
	if err != nil {
		return nil, err
	}
	return parseAptSimulation(out)
}

// Simulate simulates installing exactly set's versions, removing nothing.
func (a *Apt) Simulate(ctx context.Context, set []Package) ([]Package, error) {
	args := append([]string{"-s", "-q", "--no-remove", "install"}, pinned(set)...)
	out, err := a.Run(ctx, aptEnv, "apt-get", args...)
	if err != nil {
		return nil, err
	}
	cands, err := parseAptSimulation(out)
	if err != nil {
		return nil, err
	}
	ps := make([]Package, len(cands))
	for i, c := range cands {
		ps[i] = c.Package
	}
	return ps, nil
}

// Install installs exactly set's versions, removing nothing and
// downgrading nothing.
func (a *Apt) Install(ctx context.Context, set []Package) error {
	// An install a crash or a reboot cut off is finished first, as apt
	// asks.
	if _, err := a.Run(ctx, aptEnv, "dpkg", "--configure", "-a", "--force-confdef", "--force-confold"); err != nil {
		return err
	}
	args := append(append(slices.Clone(aptOpts), "--no-remove", "install"), pinned(set)...)
	_, err := a.Run(ctx, aptEnv, "apt-get", args...)
	return err
}

// Installed asks dpkg what is installed, by the names apt gives: a
// package of a foreign architecture with it (libc6:i386), the others
// without.
func (a *Apt) Installed(ctx context.Context) (map[string]string, error) {
	native, err := a.Run(ctx, nil, "dpkg", "--print-architecture")
	if err != nil {
		return nil, err
	}
	arch := strings.TrimSpace(string(native))
	out, err := a.Run(ctx, nil, "dpkg-query", "-W", "-f", "${Package}\t${Architecture}\t${Version}\t${db:Status-Status}\n")
	if err != nil {
		return nil, err
	}
	got := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 4 || f[3] != "installed" {
			continue
		}
		name := f[0]
		if f[1] != arch && f[1] != "all" {
			name += ":" + f[1]
		}
		got[name] = f[2]
	}
	return got, sc.Err()
}

// Keep downloads the From version of every upgraded package into dir
// (apt-get download), else finds it in apt's cache; it returns those it
// found nowhere. A package that was new needs nothing kept: it is removed.
func (a *Apt) Keep(ctx context.Context, dir string, changes []Package) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var missing []string
	for _, p := range changes {
		if p.From == "" || a.kept(dir, p) != "" {
			continue
		}
		if _, err := a.Run(ctx, aptEnv, "sh", "-c", `cd "$1" && apt-get -q download "$2"`, "keep", dir, p.Name+"="+p.From); err == nil && a.kept(dir, p) != "" {
			continue
		}
		missing = append(missing, p.Name+" "+p.From)
	}
	return missing, nil
}

// kept is the .deb of p's From version in dir or apt's cache ("": none).
func (a *Apt) kept(dir string, p Package) string {
	// A .deb's file name has the version with its epoch's colon escaped.
	pattern := p.Name + "_" + strings.ReplaceAll(p.From, ":", "%3a") + "_*.deb"
	for _, d := range []string{dir, a.Cache} {
		if d == "" {
			continue
		}
		if m, _ := filepath.Glob(filepath.Join(d, pattern)); len(m) > 0 {
			return m[0]
		}
	}
	return ""
}

// Restore installs the From versions again (a kept .deb first, else from
// the repositories) and removes the packages that were new.
func (a *Apt) Restore(ctx context.Context, dir string, changes []Package) error {
	var args []string
	for _, p := range changes {
		switch {
		case p.From == "":
			args = append(args, p.Name+"-")
		case a.kept(dir, p) != "":
			args = append(args, a.kept(dir, p))
		default:
			args = append(args, p.Name+"="+p.From)
		}
	}
	if len(args) == 0 {
		return nil
	}
	args = append(append(slices.Clone(aptOpts), "--allow-downgrades", "install"), args...)
	_, err := a.Run(ctx, aptEnv, "apt-get", args...)
	return err
}

// RebootRequired reads Debian's reboot sentinel and the packages that
// asked for it.
func (a *Apt) RebootRequired(context.Context) (bool, string, error) {
	if _, err := os.Stat(a.Sentinel); os.IsNotExist(err) {
		return false, "", nil
	} else if err != nil {
		return false, "", err
	}
	why := a.Sentinel + " exists"
	if pkgs, err := os.ReadFile(a.Sentinel + ".pkgs"); err == nil && len(bytes.TrimSpace(pkgs)) > 0 {
		why += " (" + strings.Join(strings.Fields(string(pkgs)), ", ") + ")"
	}
	return true, why, nil
}

func pinned(set []Package) []string {
	out := make([]string, len(set))
	for i, p := range set {
		out[i] = p.Name + "=" + p.To
	}
	return out
}

// aptInst is a line of apt-get -s: "Inst NAME [OLD] (NEW RELEASES [ARCH])",
// the old version absent for a new package; after it, in brackets, the
// dependencies apt breaks for a moment while it orders the installs.
var aptInst = regexp.MustCompile(`^Inst (\S+)(?: \[([^\]]*)\])? \((\S+) (.*?) \[[^\]]*\]\)(?: \[[^\]]*\])*$`)

// parseAptSimulation reads apt-get -s: what it would install, and a
// removal as an error (the commands here never remove).
func parseAptSimulation(out []byte) ([]Candidate, error) {
	var got []Candidate
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "Inst "):
			m := aptInst.FindStringSubmatch(line)
			if m == nil {
				return nil, fmt.Errorf("apt-get -s: cannot read %q", line)
			}
			got = append(got, Candidate{Package: Package{Name: m[1], From: m[2], To: m[3]}, Release: m[4]})
		case strings.HasPrefix(line, "Remv "):
			return nil, fmt.Errorf("apt-get -s would remove a package (%s): a patch campaign removes none", strings.TrimPrefix(line, "Remv "))
		}
	}
	return got, sc.Err()
}
