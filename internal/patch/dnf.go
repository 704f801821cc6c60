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
	"strconv"
	"strings"

	"github.com/kustodian/kustodian/internal/atomicfile"
)

// Dnf is the package manager of RHEL-family hosts (Fedora, CentOS
// Stream, Rocky, Alma): dnf and rpm, with the host's own repositories and
// keys. A rollback is dnf's own: the transactions since the one before
// the install are rolled back (dnf history rollback), from the
// repositories, which must still hold the old versions.
type Dnf struct {
	// Run runs the queries; Loud what changes the host (its output is
	// the job's).
	Run, Loud Runner
	// Args go before every dnf command's own (a test's --installroot);
	// RPMArgs before every rpm query's (its --root).
	Args, RPMArgs []string
}

// NewDnf is the host's dnf, its output to log.
func NewDnf(log io.Writer) *Dnf {
	return &Dnf{Run: Exec(log), Loud: ExecLoud(log)}
}

// Name is dnf.
func (d *Dnf) Name() string { return "dnf" }

func (d *Dnf) args(args ...string) []string {
	return append(append(slices.Clone(d.Args), "--setopt=color=never"), args...)
}

// Refresh reads the repositories' metadata again (dnf makecache
// --refresh).
func (d *Dnf) Refresh(ctx context.Context) error {
	_, err := d.Loud(ctx, nil, "dnf", d.args("-q", "makecache", "--refresh")...)
	return err
}

// Updates are what dnf upgrade would change, with the new packages it
// needs, each marked security when a security advisory of the
// repositories names its version.
func (d *Dnf) Updates(ctx context.Context) ([]Candidate, error) {
	return d.transaction(ctx, "upgrade")
}

// Simulate is what installing exactly set's versions would change.
func (d *Dnf) Simulate(ctx context.Context, set []Package) ([]Candidate, error) {
	return d.transaction(ctx, append([]string{"install"}, d.pinned(set)...)...)
}

// transaction resolves a dnf command without running it (--assumeno) and
// reads what it would change. dnf says "Operation aborted." (on its
// standard error) and exits 1
// when it was told no; "Nothing to do." with 0.
func (d *Dnf) transaction(ctx context.Context, cmd ...string) ([]Candidate, error) {
	out, err := d.Run(ctx, nil, "dnf", d.args(append([]string{"--assumeno"}, cmd...)...)...)
	var exit *CommandError
	if err != nil && !(errors.As(err, &exit) && exit.Code == 1 && strings.Contains(exit.Tail, "Operation aborted.")) {
		return nil, err
	}
	got, err := parseDnfTransaction(out)
	if err != nil || len(got) == 0 {
		return got, err
	}
	installed, err := d.Installed(ctx)
	if err != nil {
		return nil, err
	}
	security, err := d.security(ctx)
	if err != nil {
		return nil, err
	}
	for i := range got {
		got[i].From = installed[got[i].Name]
		got[i].Security = security[got[i].Name+"-"+got[i].To]
	}
	return got, nil
}

// security are the versions (NAME-EVR) that the repositories' security
// advisories name among the updates.
func (d *Dnf) security(ctx context.Context) (map[string]bool, error) {
	out, err := d.Run(ctx, nil, "dnf", d.args("-q", "updateinfo", "list", "--security", "--updates")...)
	if err != nil {
		return nil, err
	}
	got := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		// ADVISORY SEVERITY/TYPE NEVRA
		if f := strings.Fields(l); len(f) >= 3 {
			got[trimArch(f[len(f)-1])] = true
		}
	}
	return got, nil
}

// trimArch is NAME-EVR of NAME-EVR.ARCH.
func trimArch(nevra string) string {
	if i := strings.LastIndexByte(nevra, '.'); i > 0 {
		return nevra[:i]
	}
	return nevra
}

// Newer asks rpm's own comparison whether version v is newer than than.
func (d *Dnf) Newer(ctx context.Context, v, than string) (bool, error) {
	for _, s := range []string{v, than} {
		if !rpmVersion.MatchString(s) {
			return false, fmt.Errorf("%q is not an rpm version", s)
		}
	}
	out, err := d.Run(ctx, nil, "rpm", "--eval", fmt.Sprintf(`%%{lua: print(rpm.vercmp(%q, %q))}`, v, than))
	if err != nil {
		return false, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		return false, fmt.Errorf("rpm.vercmp(%q, %q): %q", v, than, out)
	}
	return n > 0, nil
}

// rpmVersion is [EPOCH:]VERSION[-RELEASE] as rpm allows it, nothing that
// could end the Lua string it is put in.
var rpmVersion = regexp.MustCompile(`^([0-9]+:)?[A-Za-z0-9._+~^]+(-[A-Za-z0-9._+~^]+)?$`)

// Install installs exactly set's versions. rpm runs a package's %post
// after the package is in, and a failing one leaves dnf's exit status 0:
// its "Error in POSTIN scriptlet" fails the install here.
func (d *Dnf) Install(ctx context.Context, set []Package) error {
	out, err := d.Loud(ctx, nil, "dnf", d.args(append([]string{"-y", "install"}, d.pinned(set)...)...)...)
	if err != nil {
		return err
	}
	if failed := scriptletErrors(out); len(failed) > 0 {
		return fmt.Errorf("dnf install: %s", strings.Join(failed, "; "))
	}
	return nil
}

var scriptletError = regexp.MustCompile(`(?m)^Error in \S+ scriptlet in rpm package \S+`)

func scriptletErrors(out []byte) []string {
	var got []string
	for _, m := range scriptletError.FindAll(out, -1) {
		got = append(got, string(m))
	}
	return got
}

func (d *Dnf) pinned(set []Package) []string {
	out := make([]string, len(set))
	for i, p := range set {
		out[i] = p.Name + "-" + p.To
	}
	return out
}

// Installed asks rpm what is installed: NAME, or NAME.ARCH for a package
// installed for two architectures, at EVR (the epoch only when it has
// one, as dnf writes versions).
func (d *Dnf) Installed(ctx context.Context) (map[string]string, error) {
	out, err := d.Run(ctx, nil, "rpm", append(slices.Clone(d.RPMArgs), "-qa", "--qf", `%{NAME}\t%{ARCH}\t%{EVR}\n`)...)
	if err != nil {
		return nil, err
	}
	type pkg struct{ arch, evr string }
	byName := map[string][]pkg{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Split(sc.Text(), "\t")
		if len(f) != 3 || f[0] == "gpg-pubkey" {
			continue
		}
		byName[f[0]] = append(byName[f[0]], pkg{f[1], f[2]})
	}
	got := map[string]string{}
	for name, ps := range byName {
		if len(ps) == 1 {
			got[name] = ps[0].evr
			continue
		}
		for _, p := range ps {
			got[name+"."+p.arch] = p.evr
		}
	}
	return got, sc.Err()
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
		out, err := d.Run(ctx, nil, "dnf", d.args("-q", "repoquery", "--qf", "%{evr}", p.Name+"-"+p.From)...)
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
	out, err := d.Run(ctx, nil, "dnf", d.args("-q", "history", "list")...)
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
		_, err := d.Loud(ctx, nil, "dnf", d.args("-y", "history", "rollback", strconv.Itoa(before))...)
		return err
	}
	ids, err := d.transactions(ctx)
	if err != nil {
		return err
	}
	slices.Sort(ids)
	for _, id := range slices.Backward(ids) {
		if _, err := d.Loud(ctx, nil, "dnf", d.args("-y", "history", "undo", strconv.Itoa(id))...); err != nil {
			return err
		}
	}
	return nil
}

// RebootRequired asks needs-restarting -r (dnf-utils), which exits 1 when
// the host needs a reboot for what was updated; without it (or with Args,
// which manage another root than the running host's), a new kernel among
// the changes needs one.
func (d *Dnf) RebootRequired(ctx context.Context, changes []Package) (bool, string, error) {
	if len(d.Args) == 0 {
		out, err := d.Run(ctx, nil, "needs-restarting", "-r")
		var exit *CommandError
		switch {
		case err == nil:
			return false, "", nil
		case errors.As(err, &exit) && exit.Code == 1:
			return true, "needs-restarting -r: " + strings.Join(strings.Fields(string(out)), " "), nil
		}
	}
	var kernels []string
	for _, p := range changes {
		if p.Name == "kernel" || p.Name == "kernel-core" || strings.HasPrefix(p.Name, "kernel-rt") {
			kernels = append(kernels, p.Name+" "+p.To)
		}
	}
	if len(kernels) > 0 {
		return true, "a new kernel: " + strings.Join(kernels, ", "), nil
	}
	return false, "", nil
}

// dnfSections are the headings of dnf's transaction table, each saying
// whether its packages are installed (Installing, Upgrading) or not (a
// removal, a downgrade: a campaign makes none). A heading not known here
// counts as one that is not.
var dnfSections = map[string]bool{
	"Installing:": true, "Upgrading:": true, "Installing dependencies:": true, "Installing weak dependencies:": true,
}

// parseDnfTransaction reads dnf's transaction table: the packages it
// would install or upgrade, and from which repository; any other change
// is an error. A name too long for its column is on a line of its own,
// the rest on the next.
func parseDnfTransaction(out []byte) ([]Candidate, error) {
	var got []Candidate
	section, carry := "", ""
	for _, line := range strings.Split(string(out), "\n") {
		t := strings.TrimSpace(line)
		switch {
		case t == "" || strings.HasPrefix(t, "Transaction Summary"):
			section, carry = "", ""
		case !strings.HasPrefix(line, " "):
			if strings.HasSuffix(t, ":") {
				section, carry = t, ""
			}
		case section == "":
			// The table's header.
		default:
			f := strings.Fields(carry + " " + t)
			if len(f) < 4 {
				carry += " " + t
				continue
			}
			carry = ""
			if !dnfSections[section] {
				return nil, fmt.Errorf("dnf would make a change a patch campaign makes none of: %s %s %s", strings.TrimSuffix(section, ":"), f[0], f[2])
			}
			// NAME ARCH EVR REPOSITORY SIZE UNIT
			got = append(got, Candidate{Package: Package{Name: f[0], To: f[2]}, Release: f[3]})
		}
	}
	return got, nil
}
