package patch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/kustodian/kustodian/internal/atomicfile"
)

// Dnf is the package manager of RHEL-family hosts (RHEL 8 and 9, CentOS
// Stream, Rocky, Alma): dnf 4 and rpm, with the host's own repositories
// and keys. What it would do is asked of dnf's own Python API (dnfAPI);
// what changes the host is dnf's command line, its output the job's. A
// rollback is dnf's own: the transactions since the one before the
// install are rolled back (dnf history rollback), from the repositories,
// which must still hold the old versions.
type Dnf struct {
	// Run runs the queries; Loud what changes the host (its output is
	// the job's).
	Run, Loud Runner
	// Root is a test's root directory that dnf and rpm manage as a
	// host's own (--installroot), with its repositories in
	// Root/etc/yum.repos.d; "" for the host.
	Root string
	// Python is the interpreter of dnf's API ("": the one dnf runs with).
	Python string
	// refreshed: Refresh fetched the metadata, and everything after reads
	// only that (-C, cacheonly), so that what is installed is what was
	// resolved and checked.
	refreshed bool
}

// NewDnf is the host's dnf, its output to log.
func NewDnf(log io.Writer) *Dnf {
	return &Dnf{Run: Exec(log), Loud: ExecLoud(log)}
}

// dnfEnv: dnf's messages untranslated, as they are read here.
var dnfEnv = []string{"LC_ALL=C.UTF-8"}

// Name is dnf.
func (d *Dnf) Name() string { return "dnf" }

func (d *Dnf) args(args ...string) []string {
	out := []string{"--setopt=color=never"}
	if d.Root != "" {
		out = append(out, "--installroot", d.Root, "--releasever", "1", "--setopt=reposdir="+filepath.Join(d.Root, "etc/yum.repos.d"), "--setopt=cachedir="+filepath.Join(d.Root, "var/cache/dnf"))
	}
	return append(out, args...)
}

// Refresh reads the repositories' metadata again (dnf makecache
// --refresh): what the job then resolves and installs.
func (d *Dnf) Refresh(ctx context.Context) error {
	_, err := d.Loud(ctx, dnfEnv, "dnf", d.args("-q", "makecache", "--refresh")...)
	d.refreshed = err == nil
	return err
}

// cached is -C after Refresh.
func (d *Dnf) cached() []string {
	if d.refreshed {
		return []string{"-C"}
	}
	return nil
}

// Updates are what dnf upgrade would change, with the new packages it
// needs, each marked security when a security advisory of the
// repositories names its version.
func (d *Dnf) Updates(ctx context.Context) ([]Candidate, error) {
	return d.plan(ctx, nil)
}

// Simulate is what installing exactly set's versions would change.
func (d *Dnf) Simulate(ctx context.Context, set []Package) ([]Candidate, error) {
	return d.plan(ctx, d.pinned(set))
}

func (d *Dnf) plan(ctx context.Context, specs []string) ([]Candidate, error) {
	var changes []struct {
		Name, From, To, Repo string
		Security             bool
	}
	if err := d.api(ctx, map[string]any{"op": "plan", "specs": specs}, &changes); err != nil {
		return nil, err
	}
	out := make([]Candidate, len(changes))
	for i, c := range changes {
		out[i] = Candidate{Package: Package{Name: c.Name, From: c.From, To: c.To}, Release: c.Repo, Security: c.Security}
	}
	return out, nil
}

// Newer asks rpm's own comparison (labelCompare, epoch, version and
// release each) whether version v is newer than than.
func (d *Dnf) Newer(ctx context.Context, v, than string) (bool, error) {
	var newer bool
	err := d.api(ctx, map[string]any{"op": "newer", "a": v, "b": than}, &newer)
	return newer, err
}

// Install installs exactly set's versions, from the metadata Refresh
// fetched. rpm runs a package's %post after the package is in, and a
// failing one leaves dnf's exit status 0: its "Error in POSTIN scriptlet"
// fails the install here.
func (d *Dnf) Install(ctx context.Context, set []Package) error {
	out, err := d.Loud(ctx, dnfEnv, "dnf", d.args(append(append(d.cached(), "-y", "install"), d.pinned(set)...)...)...)
	if err != nil {
		return err
	}
	if failed := scriptletErrors(out); len(failed) > 0 {
		return fmt.Errorf("dnf install: %s", strings.Join(failed, "; "))
	}
	return nil
}

var scriptletError = regexp.MustCompile(`Error in \S+ scriptlet in rpm package \S+`)

func scriptletErrors(out []byte) []string {
	var got []string
	for _, m := range scriptletError.FindAll(out, -1) {
		got = append(got, string(m))
	}
	return got
}

// dnfArchs are the architectures a key's ".ARCH" may name.
var dnfArchs = []string{"i686", "i386", "x86_64", "aarch64", "ppc64le", "s390x", "armv7hl", "noarch"}

// pinned are dnf's specs of set: NAME-EVR, or NAME-EVR.ARCH for a key
// NAME.ARCH.
func (d *Dnf) pinned(set []Package) []string {
	out := make([]string, len(set))
	for i, p := range set {
		out[i] = p.Name + "-" + p.To
		if j := strings.LastIndexByte(p.Name, '.'); j > 0 && slices.Contains(dnfArchs, p.Name[j+1:]) {
			out[i] = p.Name[:j] + "-" + p.To + "." + p.Name[j+1:]
		}
	}
	return out
}

// Installed are the versions installed now, by key (the newest of a
// package installed in several, a kernel).
func (d *Dnf) Installed(ctx context.Context) (map[string]string, error) {
	got := map[string]string{}
	err := d.api(ctx, map[string]any{"op": "installed"}, &got)
	return got, err
}

// historyFile keeps, in a job's keep directory, the last dnf transaction
// before the install: a rollback rolls back to it.
const historyFile = "dnf-history-before"

// Keep writes dnf's last transaction to dir, and returns the old versions
// the repositories no longer have (dnf history rollback installs them
// from there).
func (d *Dnf) Keep(ctx context.Context, dir string, changes []Package) ([]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	last, err := d.lastTransaction(ctx)
	if err != nil {
		return nil, err
	}
	if err := atomicfile.Write(filepath.Join(dir, historyFile), []byte(strconv.Itoa(last)+"\n"), 0o600); err != nil {
		return nil, err
	}
	var missing []string
	for _, p := range changes {
		if p.From == "" {
			continue
		}
		out, err := d.Run(ctx, dnfEnv, "dnf", d.args(append(d.cached(), "-q", "repoquery", "--qf", "%{evr}", d.pinned([]Package{{Name: p.Name, To: p.From}})[0])...)...)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(strings.Fields(string(out)), p.From) {
			missing = append(missing, p.Name+" "+p.From)
		}
	}
	return missing, nil
}

// lastTransaction is the ID of dnf's last transaction (0: none).
func (d *Dnf) lastTransaction(ctx context.Context) (int, error) {
	ids, err := d.transactions(ctx)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	return slices.Max(ids), nil
}

// transactions are the IDs dnf history lists.
func (d *Dnf) transactions(ctx context.Context) ([]int, error) {
	out, err := d.Run(ctx, dnfEnv, "dnf", d.args("-q", "history", "list")...)
	if err != nil {
		return nil, err
	}
	var ids []int
	for _, l := range strings.Split(string(out), "\n") {
		id, _, ok := strings.Cut(l, "|")
		if !ok {
			continue
		}
		if n, err := strconv.Atoi(strings.TrimSpace(id)); err == nil {
			ids = append(ids, n)
		}
	}
	return ids, nil
}

// Restore rolls dnf back to the transaction Keep wrote: every transaction
// since, the install among them, is undone (the old versions from the
// repositories, the new packages removed). With none before, each is
// undone, the last first.
func (d *Dnf) Restore(ctx context.Context, dir string, _ []Package) error {
	data, err := os.ReadFile(filepath.Join(dir, historyFile))
	if err != nil {
		return fmt.Errorf("the job kept no dnf transaction to roll back to: %w", err)
	}
	before, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		return fmt.Errorf("%s: %q is not a transaction ID", filepath.Join(dir, historyFile), data)
	}
	if before > 0 {
		_, err := d.Loud(ctx, dnfEnv, "dnf", d.args("-y", "history", "rollback", strconv.Itoa(before))...)
		return err
	}
	ids, err := d.transactions(ctx)
	if err != nil {
		return err
	}
	slices.Sort(ids)
	for _, id := range slices.Backward(ids) {
		if _, err := d.Loud(ctx, dnfEnv, "dnf", d.args("-y", "history", "undo", strconv.Itoa(id))...); err != nil {
			return err
		}
	}
	return nil
}

// RebootRequired asks dnf needs-restarting -r (dnf-plugins-core), which
// says "Reboot is required" when the host needs one for what was updated;
// without it (or with Root, which is not the running host), a new kernel
// among the changes needs one.
func (d *Dnf) RebootRequired(ctx context.Context, changes []Package) (bool, string, error) {
	if d.Root == "" {
		out, err := d.Run(ctx, dnfEnv, "dnf", d.args("-q", "needs-restarting", "-r")...)
		switch {
		case bytes.Contains(out, []byte("Reboot is required")):
			return true, "dnf needs-restarting -r: " + strings.Join(strings.Fields(string(out)), " "), nil
		case err == nil:
			return false, "", nil
		}
	}
	var kernels []string
	for _, p := range changes {
		if name, _, _ := strings.Cut(p.Name, "."); name == "kernel" || name == "kernel-core" || strings.HasPrefix(name, "kernel-rt") {
			kernels = append(kernels, p.Name+" "+p.To)
		}
	}
	if len(kernels) > 0 {
		return true, "a new kernel: " + strings.Join(kernels, ", "), nil
	}
	return false, "", nil
}
