package patch

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kustodian/kustodian/internal/rollout"
)

func TestDnfSpecsAndScriptletErrorsAreRead(t *testing.T) {
	d := &Dnf{}
	got := d.pinned([]Package{{Name: "kpt-test", To: "2-1"}, {Name: "glibc.i686", To: "2.34-100.el9"}, {Name: "python3.11", To: "1:3.11.7-1"}})
	if want := []string{"kpt-test-2-1", "glibc-2.34-100.el9.i686", "python3.11-1:3.11.7-1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("specs %q, want %q", got, want)
	}
	// stdout and stderr are written into one buffer as they come: an
	// error line need not begin one.
	if got := scriptletErrors([]byte("  Running scriptlet: kpt-test-4-1.noarch   1/2 Error in POSTIN scriptlet in rpm package kpt-test\nComplete!\n")); len(got) != 1 {
		t.Errorf("scriptlet errors: %q", got)
	}
}

// rpmRepo is a local RPM repository (createrepo_c) of packages the test
// builds with rpmbuild, with a security advisory for some.
type rpmRepo struct {
	t         *testing.T
	dir, work string
	security  []string // name-version-release
}

func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: make deps installs it (Debian packages dnf, rpm, createrepo-c)", tool)
		}
	}
}

// add builds name at version (release 1), needing needs; a failing one's
// %post fails (in Lua: the root directory has no shell).
func (r *rpmRepo) add(name, version, needs string, failing bool) {
	r.t.Helper()
	spec := fmt.Sprintf("Name: %s\nVersion: %s\nRelease: 1\nSummary: a package of the patch campaign tests\nLicense: MIT\nBuildArch: noarch\n", name, version)
	if needs != "" {
		spec += "Requires: " + needs + "\n"
	}
	// A file of each version's own: versions of a kernel are installed
	// side by side.
	spec += fmt.Sprintf("%%description\ntest\n%%install\nmkdir -p %%{buildroot}/usr/share/%[1]s\necho %[2]s > %%{buildroot}/usr/share/%[1]s/%[2]s\n%%files\n/usr/share/%[1]s/%[2]s\n", name, version)
	if failing {
		spec += "%post -p <lua>\nerror(\"postinst: this version does not configure\")\n"
	}
	f := filepath.Join(r.work, name+"-"+version+".spec")
	if err := os.WriteFile(f, []byte(spec), 0o644); err != nil {
		r.t.Fatal(err)
	}
	cmd := exec.Command("rpmbuild", "-bb", "--define", "_topdir "+filepath.Join(r.work, "top"), "--define", "_rpmdir "+r.dir,
		"--define", "_build_name_fmt %{NAME}-%{VERSION}-%{RELEASE}.%{ARCH}.rpm", f)
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("rpmbuild %s: %v\n%s", f, err, out)
	}
}

// publish makes the repository's metadata again, with its advisories.
func (r *rpmRepo) publish() {
	r.t.Helper()
	runTool(r.t, "createrepo_c", "-q", "--update", r.dir)
	if len(r.security) == 0 {
		return
	}
	xml := "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<updates>\n"
	for i, nvr := range r.security {
		name, vr := nvr[:strings.LastIndex(nvr[:strings.LastIndex(nvr, "-")], "-")], nvr[strings.LastIndex(nvr[:strings.LastIndex(nvr, "-")], "-")+1:]
		v, rel, _ := strings.Cut(vr, "-")
		xml += fmt.Sprintf(`<update from="tests@kustodian.invalid" status="stable" type="security" version="2.0"><id>KPT-2026-%04d</id><title>%s</title><issued date="2026-11-01 00:00:00"/><severity>Important</severity><description>test</description><pkglist><collection short="t"><name>t</name><package name="%s" version="%s" release="%s" epoch="0" arch="noarch" src="%s.src.rpm"><filename>%s.noarch.rpm</filename></package></collection></pkglist></update>`+"\n",
			i+1, nvr, name, v, rel, nvr, nvr)
	}
	xml += "</updates>\n"
	f := filepath.Join(r.work, "updateinfo.xml")
	if err := os.WriteFile(f, []byte(xml), 0o644); err != nil {
		r.t.Fatal(err)
	}
	runTool(r.t, "modifyrepo_c", f, filepath.Join(r.dir, "repodata"))
}

func runTool(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// rpmInstalled is what rpm says a root directory has: each package's
// versions (VERSION-RELEASE), oldest first, joined by spaces.
func rpmInstalled(t *testing.T, root string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(runTool(t, "rpm", "--root", root, "-qa", "--qf", "%{NAME} %{VERSION}-%{RELEASE}\n")), "\n") {
		name, v, _ := strings.Cut(l, " ")
		got[name] = strings.TrimSpace(got[name] + " " + v)
	}
	for name, vs := range got {
		f := strings.Fields(vs)
		slices.Sort(f)
		got[name] = strings.Join(f, " ")
	}
	return got
}

// rpmHost is a root directory that dnf and rpm manage as a host's own,
// with the repository configured in it.
func rpmHost(t *testing.T, repo *rpmRepo, log *strings.Builder) *Dnf {
	t.Helper()
	root := t.TempDir()
	conf := fmt.Sprintf("[kpt]\nname=kpt\nbaseurl=file://%s\ngpgcheck=0\nmetadata_expire=0\n", repo.dir)
	if err := os.MkdirAll(filepath.Join(root, "etc/yum.repos.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/yum.repos.d/kpt.repo"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return &Dnf{Run: Exec(log), Loud: ExecLoud(log), Root: root}
}

// A patch campaign with Debian's dnf and rpm, each host a root directory:
// the first resolves the security updates (kpt-test 2, which needs a new
// kpt-lib, and a kernel, installed beside the one before) and installs
// them, and needs a reboot; kpt-test 3 is published; the second host
// installs exactly the set, 2, not 3; a campaign whose kpt-test 4 fails
// its %post is rolled back to 2 by dnf history rollback.
func TestDnfInstallsExactlyTheSetAndRollsBackInRootDirectories(t *testing.T) {
	need(t, "dnf", "rpm", "rpmbuild", "createrepo_c", "modifyrepo_c")
	ctx := context.Background()
	repo := &rpmRepo{t: t, dir: t.TempDir(), work: t.TempDir()}
	repo.add("kpt-test", "1", "", false)
	repo.add("kpt-other", "1", "", false)
	repo.add("kernel", "1", "", false)
	repo.publish()
	var log strings.Builder
	hosts := []*Dnf{rpmHost(t, repo, &log), rpmHost(t, repo, &log)}
	for _, h := range hosts {
		if err := h.Refresh(ctx); err != nil {
			t.Fatalf("%v\n%s", err, log.String())
		}
		if err := h.Install(ctx, []Package{{Name: "kpt-test", To: "1-1"}, {Name: "kpt-other", To: "1-1"}, {Name: "kernel", To: "1-1"}}); err != nil {
			t.Fatalf("%v\n%s", err, log.String())
		}
	}
	repo.add("kpt-lib", "2", "", false)
	repo.add("kpt-test", "2", "kpt-lib >= 2", false)
	repo.add("kpt-other", "2", "", false) // not a security update
	// A kernel is installed beside the one before (installonly): the
	// newest installed is the version it comes from.
	repo.add("kernel", "2", "", false)
	repo.security = []string{"kpt-test-2-1", "kernel-2-1"}
	repo.publish()

	job := func(h *Dnf, o Order) (*Result, error) {
		dir := t.TempDir()
		data, _ := json.Marshal(o)
		if err := os.WriteFile(filepath.Join(dir, OrderFile), data, 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := Apply(ctx, h, dir, filepath.Join(dir, "reboot-required"), func(f string, a ...any) { fmt.Fprintf(&log, f+"\n", a...) })
		if err != nil {
			if rerr := Rollback(ctx, h, dir, func(string, ...any) {}); rerr != nil {
				t.Fatalf("rollback after %v: %v\n%s", err, rerr, log.String())
			}
		}
		return r, err
	}
	spec := Spec{Updates: rollout.UpdatesSecurity}
	first, err := job(hosts[0], Order{Spec: spec, Resolve: true})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	set := []Package{{Name: "kernel", From: "1-1", To: "2-1"}, {Name: "kpt-lib", To: "2-1"}, {Name: "kpt-test", From: "1-1", To: "2-1"}}
	if !reflect.DeepEqual(first.Set, set) || !reflect.DeepEqual(first.Changes, set) {
		t.Errorf("the first host resolved %+v and changed %+v, want %+v (kpt-other 2 is no security update)", first.Set, first.Changes, set)
	}
	if !first.RebootRequired || !strings.Contains(first.RebootWhy, "kernel 2-1") {
		t.Errorf("after a new kernel: reboot required %v (%s), want it, naming the kernel", first.RebootRequired, first.RebootWhy)
	}
	repo.add("kpt-test", "3", "kpt-lib >= 2", false)
	repo.security = append(repo.security, "kpt-test-3-1")
	repo.publish()
	if _, err := job(hosts[1], Order{Spec: spec, Set: first.Set}); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	// What rpm itself says is installed (a kernel beside the one before).
	want := map[string]string{"kpt-test": "2-1", "kpt-lib": "2-1", "kpt-other": "1-1", "kernel": "1-1 2-1"}
	for i, h := range hosts {
		if got := rpmInstalled(t, h.Root); !reflect.DeepEqual(got, want) {
			t.Errorf("host %d has %v, want %v", i, got, want)
		}
	}

	// kpt-test 4 fails its %post: dnf says Complete!, the install fails
	// all the same, and the rollback brings 2 back.
	// kpt-other 2 is now named by an advisory, and 3 came after it: 3
	// carries the fix, and a security campaign installs it.
	repo.add("kpt-test", "4", "kpt-lib >= 2", true)
	repo.add("kpt-other", "3", "", false)
	repo.security = append(repo.security, "kpt-test-4-1", "kpt-other-2-1")
	repo.publish()
	failed, err := job(hosts[0], Order{Spec: spec, Resolve: true})
	if err == nil || !strings.Contains(err.Error(), "Error in POSTIN scriptlet in rpm package kpt-test") {
		t.Fatalf("kpt-test 4: %v, want the failed %%post\n%s", err, log.String())
	}
	if want := []Package{{Name: "kpt-other", From: "1-1", To: "3-1"}, {Name: "kpt-test", From: "2-1", To: "4-1"}}; failed == nil || !reflect.DeepEqual(failed.Set, want) {
		t.Errorf("the failed campaign's set: %+v, want %+v", failed, want)
	}
	if got := rpmInstalled(t, hosts[0].Root); !reflect.DeepEqual(got, want) {
		t.Errorf("after the rollback the host has %v, want %v\n%s", got, want, log.String())
	}
	if newer, err := hosts[0].Newer(ctx, "1:1.0-1", "2.0-1"); err != nil || !newer {
		t.Errorf("rpm: 1:1.0-1 newer than 2.0-1: %v, %v", newer, err)
	}
}
