package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/patch"
	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/kustodian/kustodian/test/cluster"
)

// flatRepo is a signed flat APT repository holding several versions of a
// package at once (as a distribution's archive and its updates do),
// served on loopback: made with dpkg-scanpackages --multiversion, a
// Release file and gpg --clearsign with a throwaway key.
type flatRepo struct {
	t      *testing.T
	dir    string
	gnupg  string
	Source string
}

func newFlatRepo(t *testing.T) *flatRepo {
	t.Helper()
	base := t.TempDir()
	r := &flatRepo{t: t, dir: filepath.Join(base, "served"), gnupg: filepath.Join(base, "gnupg")}
	if err := os.MkdirAll(r.gnupg, 0o700); err != nil {
		t.Fatal(err)
	}
	r.gpg("--quiet", "--passphrase", "", "--quick-gen-key", "Kustodian patch test key", "ed25519", "sign", "never")
	t.Cleanup(func() { // the gpg-agent the key started, before its directory goes
		cmd := exec.Command("gpgconf", "--kill", "all")
		cmd.Env = append(os.Environ(), "GNUPGHOME="+r.gnupg)
		_ = cmd.Run()
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(r.dir)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	r.Source = fmt.Sprintf("deb [signed-by=/etc/apt/keyrings/patchtest.gpg] http://%s/ ./", l.Addr())
	return r
}

func (r *flatRepo) gpg(args ...string) []byte {
	r.t.Helper()
	cmd := exec.Command("gpg", append([]string{"--batch", "--yes"}, args...)...)
	cmd.Env = append(os.Environ(), "GNUPGHOME="+r.gnupg)
	out, err := cmd.Output()
	if err != nil {
		r.t.Fatalf("gpg %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// publish makes the repository anew with these .debs.
func (r *flatRepo) publish(debs ...string) {
	r.t.Helper()
	if err := os.RemoveAll(r.dir); err != nil {
		r.t.Fatal(err)
	}
	for _, d := range debs {
		copyFile(r.t, d, filepath.Join(r.dir, filepath.Base(d)), 0o644)
	}
	cmd := exec.Command("dpkg-scanpackages", "--multiversion", ".")
	cmd.Dir = r.dir
	pkgs, err := cmd.Output()
	if err != nil {
		r.t.Fatalf("dpkg-scanpackages: %v", err)
	}
	writeFile(r.t, filepath.Join(r.dir, "Packages"), pkgs, 0o644)
	sum := sha256.Sum256(pkgs)
	release := fmt.Sprintf("Origin: kustodian-test\nLabel: kustodian-test\nSuite: stable\nCodename: stable\nDate: %s\nSHA256:\n %s %d Packages\n",
		time.Now().UTC().Format(time.RFC1123), hex.EncodeToString(sum[:]), len(pkgs))
	writeFile(r.t, filepath.Join(r.dir, "Release"), []byte(release), 0o644)
	r.gpg("--clearsign", "--output", filepath.Join(r.dir, "InRelease"), filepath.Join(r.dir, "Release"))
}

// trust makes the repository the host's only source.
func (r *flatRepo) trust(h *host) {
	r.t.Helper()
	writeFile(r.t, filepath.Join(h.Dir, "etc/apt/keyrings/patchtest.gpg"), r.gpg("--export"), 0o644)
	writeFile(r.t, filepath.Join(h.Dir, "etc/apt/sources.list.d/patchtest.list"), []byte(r.Source+"\n"), 0o644)
	writeFile(r.t, filepath.Join(h.Dir, "etc/apt/sources.list"), nil, 0o644)
}

// testDeb builds a package of the test: name at version, needing needs,
// with a postinst that fails when failing.
func testDeb(t *testing.T, dir, name, version, needs string, failing bool) string {
	t.Helper()
	postinst := ""
	if failing {
		postinst = "#!/bin/sh\necho 'postinst: this version does not configure' >&2\nexit 1\n"
	}
	return testDebWith(t, dir, name, version, needs, postinst)
}

// testDebWith builds a package of the test with postinst ("": none).
func testDebWith(t *testing.T, dir, name, version, needs, postinst string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), name+"-"+version)
	control := fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: all\nMaintainer: Kustodian tests <tests@kustodian.invalid>\nDescription: a package of the patch campaign tests\n", name, version)
	if needs != "" {
		control += "Depends: " + needs + "\n"
	}
	writeFile(t, filepath.Join(root, "DEBIAN/control"), []byte(control), 0o644)
	if postinst != "" {
		writeFile(t, filepath.Join(root, "DEBIAN/postinst"), []byte(postinst), 0o755)
	}
	writeFile(t, filepath.Join(root, "usr/share", name, "version"), []byte(version+"\n"), 0o644)
	out := filepath.Join(dir, name+"_"+version+"_all.deb")
	if b, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", root, out).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, b)
	}
	return out
}

// patchJob runs a patch job on a host as the agent would: the order in a
// directory of its own, kustodian patch apply (or rollback) run in it.
func (h *host) patchJob(dir, verb string, o *patch.Order) (patch.Result, string, error) {
	h.t.Helper()
	if o != nil {
		b, err := json.Marshal(o)
		if err != nil {
			h.t.Fatal(err)
		}
		writeFile(h.t, filepath.Join(h.Dir, dir, patch.OrderFile), b, 0o600)
	}
	out, err := h.Exec(h.e.Ctx, "kustodian", "patch", verb, "/"+dir)
	var r patch.Result
	if b, rerr := os.ReadFile(filepath.Join(h.Dir, dir, patch.ResultFile)); rerr == nil {
		if jerr := json.Unmarshal(b, &r); jerr != nil {
			h.t.Fatalf("%s: %v", patch.ResultFile, jerr)
		}
	}
	return r, out, err
}

// A patch campaign's work on real hosts with real apt, from a signed
// repository served on loopback: the first host resolves and installs
// v2 (with the library it needs); v3 published meanwhile, a second host
// installs exactly the set, v2; its rollback brings v1 back; a v4 whose
// postinst fails is rolled back to v2; a set whose version the repository
// no longer has stops a host before it installs anything.
func TestPatchJobsInstallExactlyTheFirstHostsSetWithApt(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	debs := t.TempDir()
	app := func(v, needs string, failing bool) string { return testDeb(t, debs, "kpt-app", v, needs, failing) }
	lib := func(v string) string { return testDeb(t, debs, "kpt-lib", v, "", false) }
	app1, app2, app3, app4 := app("1", "kpt-lib (>= 1)", false), app("2", "kpt-lib (>= 2)", false), app("3", "kpt-lib (>= 2)", false), app("4", "kpt-lib (>= 2)", true)
	lib1, lib2 := lib("1"), lib("2")
	repo := newFlatRepo(t)
	repo.publish(app1, lib1)
	canary, later := newBareHost(t, e, 0), newBareHost(t, e, 1)
	for _, h := range []*host{canary, later} {
		h.install()
		repo.trust(h)
		for _, args := range [][]string{{"update"}, {"install", "kpt-app"}} {
			if out, err := h.apt(args...); err != nil {
				t.Fatalf("%s: apt-get %s: %v\n%s", h.Name, strings.Join(args, " "), err, out)
			}
		}
	}
	versions := func(h *host) string { return h.version("kpt-app") + "/" + h.version("kpt-lib") }
	spec := rollout.PatchSpec{Include: []string{"kpt-*"}}

	repo.publish(app1, app2, lib1, lib2)
	start := time.Now()
	r, out, err := canary.patchJob("var/lib/patchtest/job1", "apply", &patch.Order{Spec: spec, Resolve: true})
	t.Logf("the first host, %s:\n%s", time.Since(start).Round(time.Millisecond), out)
	want := []patch.Package{{Name: "kpt-app", From: "1", To: "2"}, {Name: "kpt-lib", From: "1", To: "2"}}
	if err != nil || !r.Resolved || !slices.Equal(r.Set, want) || !slices.Equal(r.Changes, want) || versions(canary) != "2/2" {
		t.Fatalf("the first host: %v; result %+v; installed %s; want the set %v installed", err, r, versions(canary), want)
	}

	repo.publish(app1, app2, app3, lib1, lib2)
	start = time.Now()
	r, out, err = later.patchJob("var/lib/patchtest/job1", "apply", &patch.Order{Spec: spec, Set: want})
	t.Logf("a later host, v3 published, %s:\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil || r.Resolved || !slices.Equal(r.Changes, want) || versions(later) != "2/2" {
		t.Fatalf("a later host: %v; result %+v; installed %s; want 2/2, not 3", err, r, versions(later))
	}
	start = time.Now()
	_, out, err = later.patchJob("var/lib/patchtest/job1", "rollback", nil)
	t.Logf("its rollback, %s:\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil || versions(later) != "1/1" {
		t.Fatalf("the rollback: %v; installed %s, want 1/1", err, versions(later))
	}

	repo.publish(app1, app2, app3, app4, lib1, lib2)
	start = time.Now()
	r, out, err = canary.patchJob("var/lib/patchtest/job2", "apply", &patch.Order{Spec: spec, Resolve: true})
	t.Logf("v4, its postinst failing, %s:\n%s", time.Since(start).Round(time.Millisecond), out)
	if err == nil || !strings.Contains(out, "postinst") || r.State != patch.StateInstalling {
		t.Fatalf("v4: %v, result %+v; want the install failed, its result saying installing", err, r)
	}
	start = time.Now()
	_, out, err = canary.patchJob("var/lib/patchtest/job2", "rollback", nil)
	t.Logf("its rollback, %s:\n%s", time.Since(start).Round(time.Millisecond), out)
	if err != nil || versions(canary) != "2/2" {
		t.Fatalf("the rollback of v4: %v; installed %s, want 2/2", err, versions(canary))
	}
	if st := canary.run("dpkg-query", "-W", "-f", "${db:Status-Abbrev}", "kpt-app"); strings.TrimSpace(st) != "ii" {
		t.Errorf("kpt-app after the rollback: dpkg status %q, want ii", st)
	}

	repo.publish(app1, app3, lib1, lib2) // v2 gone from the repository
	_, out, err = later.patchJob("var/lib/patchtest/job2", "apply", &patch.Order{Spec: spec, Set: want})
	if err == nil || !strings.Contains(out, "kpt-app") || versions(later) != "1/1" {
		t.Errorf("a version the repository no longer has: %v, installed %s; want a refusal naming kpt-app and nothing installed:\n%s", err, versions(later), out)
	}
}
