package patch

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/kustodian/kustodian/internal/atomicfile"
)

// Apt is the package manager of Debian and Ubuntu hosts: apt-get and
// dpkg, with the host's own sources and keys.
type Apt struct {
	// Run runs the queries; Loud what changes the host (its output is
	// the job's).
	Run, Loud Runner
	// Cache is apt's archive cache (/var/cache/apt/archives): a
	// rollback finds old versions there too.
	Cache string
	// Sentinel is the file Debian's packages leave when the host needs
	// a reboot (/run/reboot-required).
	Sentinel string
}

// NewApt is the host's apt, its output to log.
func NewApt(log io.Writer) *Apt {
	return &Apt{Run: Exec(log), Loud: ExecLoud(log), Cache: "/var/cache/apt/archives", Sentinel: "/run/reboot-required"}
}

// aptEnv keeps apt, dpkg and ucf from asking anything: a configuration
// file the admin changed stays, the package's new one is put beside it.
var aptEnv = []string{"DEBIAN_FRONTEND=noninteractive", "APT_LISTCHANGES_FRONTEND=none", "NEEDRESTART_MODE=l", "UCF_FORCE_CONFFOLD=1"}

// lockWait: apt waits for another apt or dpkg (unattended-upgrades, an
// admin) to finish, for up to 10 minutes, rather than failing at once.
var lockWait = []string{"-o", "DPkg::Lock::Timeout=600"}

// Dpkg::Use-Pty=0: the job's log gets dpkg's lines, not a progress bar.
var aptOpts = append([]string{"-q", "-y", "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold", "-o", "Dpkg::Use-Pty=0"}, lockWait...)

// Name is apt.
func (a *Apt) Name() string { return "apt" }

// Refresh runs apt-get update.
func (a *Apt) Refresh(ctx context.Context) error {
	_, err := a.Loud(ctx, aptEnv, "apt-get", append([]string{"-q", "update"}, lockWait...)...)
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

// Simulate simulates installing exactly set's versions, removing nothing;
// with -y, as the install has it, so that a downgrade or a held package
// is refused here already.
func (a *Apt) Simulate(ctx context.Context, set []Package) ([]Candidate, error) {
	args := append([]string{"-s", "-q", "-y", "--no-remove", "install"}, pinned(set)...)
	out, err := a.Run(ctx, aptEnv, "apt-get", args...)
	if err != nil {
		return nil, err
	}
	return parseAptSimulation(out)
}

// Newer asks dpkg whether version a is newer than b.
func (a *Apt) Newer(ctx context.Context, v, than string) (bool, error) {
	_, err := a.Run(ctx, nil, "dpkg", "--compare-versions", v, "gt", than)
	var exit *CommandError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &exit) && exit.Code == 1:
		return false, nil
	}
	return false, err
}

// Install installs exactly set's versions, removing nothing and
// downgrading nothing.
func (a *Apt) Install(ctx context.Context, set []Package) error {
	// An install a crash or a reboot cut off is finished first, as apt
	// asks.
	if _, err := a.Loud(ctx, aptEnv, "dpkg", "--configure", "-a", "--force-confdef", "--force-confold"); err != nil {
		return err
	}
	args := append(append(slices.Clone(aptOpts), "--no-remove", "install"), pinned(set)...)
	_, err := a.Loud(ctx, aptEnv, "apt-get", args...)
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

// Keep puts the .deb of every upgraded package's From version into dir:
// a copy of apt's cached one, else downloaded from the repositories
// (apt-get download); it returns those it found nowhere. A package that
// was new needs nothing kept: it is removed.
func (a *Apt) Keep(ctx context.Context, dir string, changes []Package) ([]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	arch, err := a.arch(ctx)
	if err != nil {
		return nil, err
	}
	var missing []string
	for _, p := range changes {
		if p.From == "" || debIn(dir, p, arch) != "" {
			continue
		}
		if cached := debIn(a.Cache, p, arch); cached != "" {
			if err := copyFile(cached, filepath.Join(dir, filepath.Base(cached))); err != nil {
				return nil, err
			}
			continue
		}
		if _, err := a.Loud(ctx, aptEnv, "sh", "-c", `cd "$1" && apt-get -q download "$2"`, "keep", dir, p.Name+"="+p.From); err == nil && debIn(dir, p, arch) != "" {
			continue
		}
		missing = append(missing, p.Name+" "+p.From)
	}
	return missing, nil
}

// arch is dpkg's own architecture.
func (a *Apt) arch(ctx context.Context) (string, error) {
	out, err := a.Run(ctx, nil, "dpkg", "--print-architecture")
	return strings.TrimSpace(string(out)), err
}

// debIn is the .deb of p's From version in dir ("": none): a .deb's file
// name is name_version_arch.deb, the epoch's colon escaped, the
// architecture the one a name:arch says, else the host's or all.
func debIn(dir string, p Package, arch string) string {
	if dir == "" {
		return ""
	}
	name, archs := p.Name, []string{arch, "all"}
	if n, a, ok := strings.Cut(p.Name, ":"); ok {
		name, archs = n, []string{a}
	}
	for _, ar := range archs {
		f := filepath.Join(dir, name+"_"+strings.ReplaceAll(p.From, ":", "%3a")+"_"+ar+".deb")
		if _, err := os.Stat(f); err == nil {
			return f
		}
	}
	return ""
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return atomicfile.Write(to, data, 0o600)
}

// Restore installs the From versions again, from the .debs kept in dir
// first, else from the repositories, then removes the packages that were
// new; a removal apt would make beyond those is refused. An old version
// found nowhere fails the restore, naming it, after everything else is
// restored.
func (a *Apt) Restore(ctx context.Context, dir string, changes []Package) error {
	arch, err := a.arch(ctx)
	if err != nil {
		return err
	}
	// dpkg may have been cut off in the install being undone: finish
	// what it can. What it cannot (the failed version's own postinst,
	// which is what a rollback is for) is replaced by the old version
	// below.
	_, _ = a.Loud(ctx, aptEnv, "dpkg", "--configure", "-a", "--force-confdef", "--force-confold")
	var kept, fromRepo, removed []string
	var gone []Package
	for _, p := range changes {
		switch deb := debIn(dir, p, arch); {
		case p.From == "":
			removed = append(removed, p.Name)
			gone = append(gone, p)
		case deb != "":
			kept = append(kept, deb)
		default:
			fromRepo = append(fromRepo, p.Name+"="+p.From)
		}
	}
	install := func(args []string) error {
		if len(args) == 0 {
			return nil
		}
		_, err := a.Loud(ctx, aptEnv, "apt-get", append(append(slices.Clone(aptOpts), "--no-remove", "--allow-downgrades", "install"), args...)...)
		return err
	}
	var failed error
	if err := install(append(slices.Clone(kept), fromRepo...)); err != nil {
		// One version found nowhere fails the whole command: restore
		// what was kept, and say what was not.
		failed = err
		if len(fromRepo) > 0 {
			if err := install(kept); err != nil {
				return err
			}
			failed = fmt.Errorf("no rollback source holds %s: %w", strings.Join(fromRepo, ", "), err)
		}
	}
	if len(removed) > 0 {
		out, err := a.Run(ctx, aptEnv, "apt-get", append([]string{"-s", "-q", "-y", "remove"}, removed...)...)
		if err != nil {
			return err
		}
		for _, r := range removals(out) {
			if find(gone, r) == nil {
				return errors.Join(failed, fmt.Errorf("removing the packages the campaign installed new (%s) would also remove %s: left installed", strings.Join(removed, ", "), r))
			}
		}
		if _, err := a.Loud(ctx, aptEnv, "apt-get", append(append(slices.Clone(aptOpts), "remove"), removed...)...); err != nil {
			return errors.Join(failed, err)
		}
	}
	return failed
}

// removals are the packages apt-get -s says it would remove.
func removals(out []byte) []string {
	var got []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) >= 2 && f[0] == "Remv" {
			got = append(got, f[1])
		}
	}
	return got
}

// RebootRequired reads Debian's reboot sentinel and the packages that
// asked for it. A kernel image among the changes needs a reboot too: on a
// Debian host without unattended-upgrades nothing writes the sentinel
// for it.
func (a *Apt) RebootRequired(_ context.Context, changes []Package) (bool, string, error) {
	var kernels []string
	for _, p := range changes {
		if strings.HasPrefix(p.Name, "linux-image-") {
			kernels = append(kernels, p.Name+" "+p.To)
		}
	}
	_, err := os.Stat(a.Sentinel)
	switch {
	case os.IsNotExist(err) && len(kernels) > 0:
		return true, "a new kernel: " + strings.Join(kernels, ", "), nil
	case os.IsNotExist(err):
		return false, "", nil
	case err != nil:
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
			got = append(got, Candidate{Package: Package{Name: m[1], From: m[2], To: m[3]}, Release: m[4], Security: IsSecurity(m[4])})
		case strings.HasPrefix(line, "Remv "):
			return nil, fmt.Errorf("apt-get -s would remove a package (%s): a patch campaign removes none", strings.TrimPrefix(line, "Remv "))
		}
	}
	return got, sc.Err()
}
