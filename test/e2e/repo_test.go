package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/dist"
)

// aptRepo is the signed APT repository `make repo` makes
// (packaging/make-repo.sh, a throwaway key), served over HTTP on loopback,
// where the hosts (sharing this machine's network) reach it as a fleet
// reaches its mirror.
type aptRepo struct {
	t      *testing.T
	dir    string // what is served
	gnupg  string // the throwaway key
	URL    string // of the APT repository
	Source string // its sources.list line
}

func newAptRepo(t *testing.T) *aptRepo {
	t.Helper()
	base := t.TempDir()
	r := &aptRepo{t: t, dir: filepath.Join(base, "served"), gnupg: filepath.Join(base, "gnupg")}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(r.dir))}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	r.URL = fmt.Sprintf("http://%s/apt", l.Addr())
	r.Source = fmt.Sprintf("deb [signed-by=/etc/apt/keyrings/kustodian.gpg] %s stable main", r.URL)
	return r
}

// publish makes the repository anew with these packages, as make repo does
// from dist/.
func (r *aptRepo) publish(pkgs ...string) {
	r.t.Helper()
	stage := r.t.TempDir()
	for _, p := range pkgs {
		copyFile(r.t, p, filepath.Join(stage, filepath.Base(p)), 0o644)
	}
	cmd := exec.Command(filepath.Join(dist.RepoRoot(r.t), "packaging", "make-repo.sh"), stage, r.dir)
	cmd.Env = append(os.Environ(), "REPO_GNUPGHOME="+r.gnupg, "REPO_KEY=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("make-repo.sh: %v\n%s", err, out)
	}
	r.t.Logf("make-repo.sh:\n%s", out)
}

// pool is the path of a published package file.
func (r *aptRepo) pool(name, version string) string {
	r.t.Helper()
	matches, _ := filepath.Glob(filepath.Join(r.dir, "apt", "pool", "main", "k", "kustodian", name+"_"+strings.ReplaceAll(version, "~", "*")+"_amd64.deb"))
	if len(matches) != 1 {
		r.t.Fatalf("the repository's pool holds %v for %s %s", matches, name, version)
	}
	return matches[0]
}

// trust gives the host the repository's key and source, as an operator
// does, and makes it the host's only source (no Debian mirror here).
func (r *aptRepo) trust(h *host) {
	r.t.Helper()
	copyFile(r.t, filepath.Join(r.dir, "kustodian.gpg"), filepath.Join(h.Dir, "etc/apt/keyrings/kustodian.gpg"), 0o644)
	writeFile(r.t, filepath.Join(h.Dir, "etc/apt/sources.list.d/kustodian.list"), []byte(r.Source+"\n"), 0o644)
	writeFile(r.t, filepath.Join(h.Dir, "etc/apt/sources.list"), nil, 0o644)
}

// apt runs apt-get on the host, without questions.
func (h *host) apt(args ...string) (string, error) {
	return h.Exec(h.e.Ctx, append([]string{"env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-q", "-y", "-o", "Dpkg::Options::=--force-confold"}, args...)...)
}

func (h *host) version(pkg string) string {
	out, _ := h.Exec(h.e.Ctx, "dpkg-query", "--show", "--showformat", "${Version}", pkg)
	return strings.TrimSpace(out)
}

// From a signed repository, as a fleet installs: the single package of
// before the split installed with apt-get install; then, in the middle of
// a maintenance, kustodian-ctl installed (which takes its files from the
// old package and brings the new kustodian with it) and both upgraded with
// apt-get upgrade; the running agent never restarted, the configuration
// kept. A tampered package and an unsigned repository are refused.
func TestInstallAndUpgradeFromSignedRepository(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	repo := newAptRepo(t)
	repo.publish(dist.Legacy(t, "deb", t.TempDir()))
	h := newBareHost(t, e, 0)
	repo.trust(h)
	for _, args := range [][]string{{"update"}, {"install", "kustodian"}} {
		if out, err := h.apt(args...); err != nil {
			t.Fatalf("apt-get %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if got := h.version("kustodian"); got != dist.LegacyVersion {
		t.Fatalf("kustodian %q installed, want %s", got, dist.LegacyVersion)
	}
	h.configure()
	h.pathUnitReady()
	config, err := os.ReadFile(filepath.Join(h.Dir, "etc/kustodian/config.yaml"))
	if err != nil {
		t.Fatal(err)
	}

	h.run("sh", "-c", "echo 'kernel upgrade' > /var/maintenance-required")
	h.waitFor("the in-progress file", func() error {
		if !h.exists("var/maintenance-in-progress") {
			return fmt.Errorf("not yet; status %q", h.property("kustodian.service", "StatusText"))
		}
		return nil
	})
	pid := h.property("kustodian.service", "MainPID")
	untouched := func(when string) {
		t.Helper()
		if got := h.property("kustodian.service", "MainPID"); got != pid || h.property("kustodian.service", "ActiveState") != "active" {
			t.Errorf("%s: the running agent was touched: MainPID %s → %s, %s", when, pid, got, h.property("kustodian.service", "ActiveState"))
		}
		if !h.exists("var/maintenance-in-progress") || !nodeUnschedulable(t, e, h.Name) || lockHolder(t, e) != h.Name {
			t.Errorf("%s: in-progress %v, cordoned %v, lock holder %q", when, h.exists("var/maintenance-in-progress"), nodeUnschedulable(t, e, h.Name), lockHolder(t, e))
		}
		if b, _ := os.ReadFile(filepath.Join(h.Dir, "etc/kustodian/config.yaml")); string(b) != string(config) {
			t.Errorf("%s: config.yaml changed:\n%s", when, b)
		}
		h.pathUnitReady()
	}

	// The split: the admin's CLI, installed where the old package was.
	agent, ctl := dist.Package(t, dist.Agent, "deb"), dist.Package(t, dist.Ctl, "deb")
	version := debVersion(t, agent)
	repo.publish(agent, ctl)
	for _, args := range [][]string{{"update"}, {"install", "kustodian-ctl"}} {
		if out, err := h.apt(args...); err != nil {
			t.Fatalf("apt-get %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if a, c := h.version("kustodian"), h.version("kustodian-ctl"); a != version || c != version {
		t.Errorf("after apt-get install kustodian-ctl: kustodian %q, kustodian-ctl %q, want both %s", a, c, version)
	}
	if out := h.run("dpkg", "-S", "/usr/bin/kustodian-ctl", "/usr/bin/kustodian"); !strings.Contains(out, "kustodian-ctl: /usr/bin/kustodian-ctl") || !strings.Contains(out, "kustodian: /usr/bin/kustodian\n") {
		t.Errorf("after the split, dpkg -S says:\n%s", out)
	}
	untouched("after the split")

	// apt-get upgrade, both packages.
	dir := t.TempDir()
	newerAgent, newer := newerBuild(t, agent, dir)
	newerCtl, _ := newerBuild(t, ctl, dir)
	repo.publish(newerAgent, newerCtl)
	for _, args := range [][]string{{"update"}, {"upgrade"}} {
		if out, err := h.apt(args...); err != nil {
			t.Fatalf("apt-get %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if a, c := h.version("kustodian"), h.version("kustodian-ctl"); a != newer || c != newer {
		t.Errorf("after apt-get upgrade: kustodian %q, kustodian-ctl %q, want both %s", a, c, newer)
	}
	untouched("after apt-get upgrade")
	h.scriptDone()
	if r := h.property("kustodian.service", "Result"); r != "success" || nodeUnschedulable(t, e, h.Name) {
		t.Errorf("after the maintenance: result %q, cordoned %v", r, nodeUnschedulable(t, e, h.Name))
	}

	// A tampered package: a newer build published and signed, then its
	// file swapped for another of the same name after the signing.
	newest, newestVersion := newerBuild(t, newerAgent, dir)
	repo.publish(newest, newerCtl)
	other, _ := newerBuild(t, newerCtl, t.TempDir()) // other bytes
	copyFile(t, other, repo.pool("kustodian", newestVersion), 0o644)
	if out, err := h.apt("update"); err != nil {
		t.Fatalf("apt-get update: %v\n%s", err, out)
	}
	if out, err := h.apt("install", "kustodian"); err == nil || !strings.Contains(out, "Hash Sum mismatch") && !strings.Contains(out, "unexpected size") {
		t.Errorf("a tampered package: apt-get install %v, want a refusal for its hash:\n%s", err, out)
	} else {
		t.Logf("a tampered package, refused:\n%s", lastLines(out, 4))
	}
	if got := h.version("kustodian"); got != newer {
		t.Errorf("kustodian %s after the tampered package, want %s still", got, newer)
	}

	// An unsigned repository: the signatures gone.
	for _, f := range []string{"InRelease", "Release.gpg"} {
		if err := os.Remove(filepath.Join(repo.dir, "apt", "dists", "stable", f)); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := h.apt("update"); err == nil || !strings.Contains(out, "is not signed") && !strings.Contains(out, "is no longer signed") {
		t.Errorf("an unsigned repository: apt-get update %v, want a refusal:\n%s", err, out)
	} else {
		t.Logf("an unsigned repository, refused:\n%s", lastLines(out, 4))
	}
}

// debVersion is a .deb's version.
func debVersion(t *testing.T, deb string) string {
	t.Helper()
	out, err := exec.Command("dpkg-deb", "--field", deb, "Version").Output()
	if err != nil {
		t.Fatalf("dpkg-deb --field %s: %v", deb, err)
	}
	return strings.TrimSpace(string(out))
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
