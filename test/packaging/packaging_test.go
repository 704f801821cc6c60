// Package packaging tests the .deb and .rpm that `make packages` builds into
// dist/: the linters, their contents, and an RPM installed into a scratch
// root. The end-to-end tests install the .deb on booted hosts. The tests run
// side by side (each in directories of its own): the linters are
// single-threaded.
package packaging

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/kustodian/kustodian/test/dist"
	"github.com/kustodian/kustodian/test/nspawn"
)

func run(t *testing.T, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// What each package must hold, both formats.
var (
	// enabledLinks are the units the agent's package enables.
	enabledLinks = []string{"etc/systemd/system/multi-user.target.wants/kustodian.path", "etc/systemd/system/timers.target.wants/kustodian-renew.timer"}
	agentFiles   = []string{
		"/usr/bin/kustodian",
		"/usr/bin/kustodian-notify",
		"/lib/systemd/system/kustodian.path",
		"/lib/systemd/system/kustodian.service",
		"/lib/systemd/system/kustodian-renew.service",
		"/lib/systemd/system/kustodian-renew.timer",
		"/etc/kustodian/config.yaml",
		"/usr/share/man/man1/kustodian.1.gz",
		"/usr/share/man/man1/kustodian-agent.1.gz",
		"/usr/share/bash-completion/completions/kustodian",
		"/usr/share/fish/vendor_completions.d/kustodian.fish",
		"/usr/share/doc/kustodian/README.md",
		"/usr/share/doc/kustodian/docs/security.md",
		"/usr/share/doc/kustodian/examples/readme-maintenance.sh",
	}
	ctlFiles = []string{
		"/usr/bin/kustodian-ctl",
		"/usr/bin/kubectl-kustodian",
		"/usr/bin/kubectl_complete-kustodian",
		"/usr/share/man/man1/kustodian-ctl.1.gz",
		"/usr/share/man/man1/kustodian-ctl-status.1.gz",
		"/usr/share/man/man1/kubectl-kustodian.1.gz",
		"/usr/share/bash-completion/completions/kustodian-ctl",
		"/usr/share/fish/vendor_completions.d/kustodian-ctl.fish",
		"/usr/share/doc/kustodian-ctl/README.md",
		"/usr/share/doc/kustodian-ctl/ansible/site.yml",
	}
	// Each package holds none of the other's: the agent's package is for
	// nodes, the CLI's for the admin's machine.
	notIn = map[string][]string{dist.Agent: ctlFiles, dist.Ctl: agentFiles}
	want  = map[string][]string{dist.Agent: agentFiles, dist.Ctl: ctlFiles}
)

// lintian reports no error on deb.
func lintian(t *testing.T, deb string) {
	t.Helper()
	out, err := exec.Command("lintian", "--tag-display-limit", "0", deb).CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("lintian did not run: %v", err) // not installed: make deps installs it
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "E: ") {
			t.Errorf("lintian: %s", line)
		}
	}
	t.Logf("lintian %s:\n%s", filepath.Base(deb), out)
}

// listed checks a package listing: every file of want, none of notIn.
func listed(t *testing.T, pkg, listing string, want, notIn []string) {
	t.Helper()
	for _, f := range want {
		if !strings.Contains(listing, f+"\n") && !strings.Contains(listing, f+" -> ") {
			t.Errorf("%s lacks %s", filepath.Base(pkg), f)
		}
	}
	for _, f := range notIn {
		if strings.Contains(listing, f+"\n") || strings.Contains(listing, f+" -> ") {
			t.Errorf("%s holds %s, which belongs to the other package", filepath.Base(pkg), f)
		}
	}
}

func TestDebLintianAndContents(t *testing.T) {
	t.Parallel()
	for _, name := range []string{dist.Agent, dist.Ctl} {
		deb := dist.Package(t, name, "deb")
		lintian(t, deb)
		listing := run(t, nil, "dpkg", "-c", deb)
		listing = regexp.MustCompile(`(?m)^.* \./`).ReplaceAllString(listing, "/")
		extra := []string{"/usr/share/zsh/vendor-completions/_" + name, "/usr/share/doc/" + name + "/copyright", "/usr/share/doc/" + name + "/changelog.gz"}
		listed(t, deb, listing, append(extra, want[name]...), notIn[name])
	}

	deb := dist.Package(t, dist.Agent, "deb")
	listing := run(t, nil, "dpkg", "-c", deb)
	// notify.urls hold tokens: the configuration is root's alone.
	if !regexp.MustCompile(`(?m)^-rw------- root/root .* \./etc/kustodian/config\.yaml$`).MatchString(listing) {
		t.Errorf("/etc/kustodian/config.yaml is not -rw------- root/root:\n%s", listing)
	}
	if ctl := run(t, nil, "dpkg", "-c", dist.Package(t, dist.Ctl, "deb")); !regexp.MustCompile(`\./usr/bin/kubectl-kustodian -> kustodian-ctl`).MatchString(ctl) {
		t.Errorf("kubectl-kustodian is not a link to kustodian-ctl:\n%s", ctl)
	}
	dir := t.TempDir()
	run(t, nil, "dpkg-deb", "-e", deb, dir)
	if b, err := os.ReadFile(filepath.Join(dir, "conffiles")); err != nil || strings.TrimSpace(string(b)) != "/etc/kustodian/config.yaml" {
		t.Errorf("conffiles: %q %v, want /etc/kustodian/config.yaml", b, err)
	}
	// The packaged binary says which version and commit it is.
	version := strings.TrimSpace(run(t, nil, "dpkg-deb", "--field", deb, "Version"))
	bin := filepath.Join(t.TempDir(), "kustodian")
	run(t, nil, "sh", "-c", "dpkg-deb --fsys-tarfile \"$1\" | tar -xO ./usr/bin/kustodian > \"$2\" && chmod +x \"$2\"", "sh", deb, bin)
	if out := run(t, nil, bin, "version"); !strings.Contains(out, "kustodian "+version+" (commit ") || strings.Contains(out, "commit none") || strings.Contains(out, "commit unknown") {
		t.Errorf("the packaged kustodian says %q, want version %s and its commit", out, version)
	}
	for _, script := range []string{"postinst", "prerm", "postrm"} {
		if _, err := os.Stat(filepath.Join(dir, script)); err != nil {
			t.Errorf("no %s: %v", script, err)
		}
	}
	// The split: kustodian-ctl takes its files over from the single
	// package of before (Replaces), which must go with it (Breaks).
	ctl := dist.Package(t, dist.Ctl, "deb")
	for _, field := range []string{"Replaces", "Breaks"} {
		if got := strings.TrimSpace(run(t, nil, "dpkg-deb", "--field", ctl, field)); !strings.HasPrefix(got, "kustodian (<< ") {
			t.Errorf("kustodian-ctl's %s: %q, want kustodian (<< the split's version)", field, got)
		}
	}
	if got := strings.TrimSpace(run(t, nil, "dpkg-deb", "--field", ctl, "Depends")); got != "" {
		t.Errorf("kustodian-ctl depends on %q: the admin's CLI needs nothing of the node's", got)
	}
}

// rpmlint unpacks a package with `rpm2cpio | cpio -id`; nfpm's payload names
// are absolute, so a plain cpio would write them into this machine's /.
func cpioWrapper(t *testing.T) string {
	dir := t.TempDir()
	script := "#!/bin/sh\nexec /usr/bin/cpio --no-absolute-filenames \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "cpio"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRpmlintAndContents(t *testing.T) {
	t.Parallel()
	for _, name := range []string{dist.Agent, dist.Ctl} {
		rpm := dist.Package(t, name, "rpm")
		cmd := exec.Command("rpmlint", "-r", filepath.Join("..", "..", "packaging", name+".rpmlintrc"), rpm)
		cmd.Env = append(os.Environ(), "PATH="+cpioWrapper(t)+":"+os.Getenv("PATH"))
		out, _ := cmd.CombinedOutput()
		t.Logf("rpmlint %s:\n%s", name, out)
		if !strings.Contains(string(out), " 0 errors") {
			t.Errorf("rpmlint reports errors on %s", name)
		}
		listing := run(t, nil, "rpm", "-qpl", rpm)
		listed(t, rpm, listing, append(want[name], "/usr/share/zsh/site-functions/_"+name, "/usr/share/licenses/"+name+"/LICENSE"), notIn[name])
	}
	if config := run(t, nil, "rpm", "-qpc", dist.Package(t, dist.Agent, "rpm")); strings.TrimSpace(config) != "/etc/kustodian/config.yaml" {
		t.Errorf("rpm -qpc: %q, want /etc/kustodian/config.yaml", config)
	}
	if got := run(t, nil, "rpm", "-qp", "--conflicts", dist.Package(t, dist.Ctl, "rpm")); !strings.HasPrefix(got, "kustodian < ") {
		t.Errorf("kustodian-ctl's rpm conflicts with %q, want kustodian < the split's version", got)
	}
}

// scratchRoot is a Debian root file system (no systemd running there) to
// install packages into with dpkg --root or rpm --root.
func scratchRoot(t *testing.T) string {
	t.Helper()
	tarball, err := nspawn.Tarball(context.Background(), testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	run(t, nil, "tar", "-C", root, "-xf", tarball)
	return root
}

// rpm -i --root into a scratch root: the files land, the scriptlets
// enable the path unit without starting anything; rpm -e removes both.
func TestRpmInstallIntoScratchRoot(t *testing.T) {
	t.Parallel()
	root := scratchRoot(t)
	agent, ctl := dist.Package(t, dist.Agent, "rpm"), dist.Package(t, dist.Ctl, "rpm")
	// The root's rpm database knows nothing of Debian's packages.
	out := run(t, nil, "rpm", "--root", root, "--nodeps", "-i", agent, ctl)
	t.Logf("rpm -i:\n%s", out)
	for _, f := range append(agentFiles, ctlFiles...) {
		if _, err := os.Lstat(filepath.Join(root, f)); err != nil {
			t.Errorf("not installed: %s", f)
		}
	}
	for _, link := range enabledLinks {
		if _, err := os.Lstat(filepath.Join(root, link)); err != nil {
			t.Errorf("not enabled: %v", err)
		}
	}
	if got := strings.TrimSpace(run(t, nil, "rpm", "--root", root, "-q", "kustodian")); !strings.HasPrefix(got, "kustodian-") {
		t.Errorf("rpm -q: %q", got)
	}
	run(t, nil, "rpm", "--root", root, "-e", "kustodian", "kustodian-ctl")
	for _, f := range append(append(agentFiles, ctlFiles...), enabledLinks...) {
		if _, err := os.Lstat(filepath.Join(root, f)); err == nil {
			t.Errorf("left after rpm -e: %s", f)
		}
	}
}

// splitUpgrade installs the single package of before the split into a
// scratch root with an edited configuration, then checks that the new CLI
// package alone is refused while the old package stays, and that both new
// packages together upgrade it in place: every file where it belongs, the
// configuration kept, the path unit still enabled.
func splitUpgrade(t *testing.T, format string, install func(root string, pkgs ...string) (string, error), owner func(root, file string) string) {
	root := scratchRoot(t)
	legacy := dist.Legacy(t, format, t.TempDir())
	if out, err := install(root, legacy); err != nil {
		t.Fatalf("installing the single package of before the split: %v\n%s", err, out)
	}
	for _, f := range slices.Concat(agentFiles[:5], ctlFiles[:2]) {
		if got := owner(root, f); got != dist.Agent {
			t.Fatalf("before the split, %s belongs to %q, want kustodian", f, got)
		}
	}
	config := filepath.Join(root, "etc/kustodian/config.yaml")
	edited := "# edited by the operator\nnamespace: maintenance\n"
	if err := os.WriteFile(config, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	agent, ctl := dist.Package(t, dist.Agent, format), dist.Package(t, dist.Ctl, format)
	if out, err := install(root, ctl); err == nil {
		t.Errorf("kustodian-ctl alone went in beside the single package of before the split:\n%s", out)
	} else {
		t.Logf("kustodian-ctl alone, refused as it should be:\n%s", out)
	}
	if out, err := install(root, agent, ctl); err != nil {
		t.Fatalf("upgrading to the two packages: %v\n%s", err, out)
	}
	for name, files := range want {
		for _, f := range files {
			if got := owner(root, f); got != name {
				t.Errorf("after the split, %s belongs to %q, want %s", f, got, name)
			}
		}
	}
	if b, err := os.ReadFile(config); err != nil || string(b) != edited {
		t.Errorf("the operator's configuration after the upgrade: %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(root, "etc/systemd/system/multi-user.target.wants/kustodian.path")); err != nil {
		t.Errorf("kustodian.path no longer enabled after the upgrade: %v", err)
	}
	// An upgrade from a version without the token's renewal enables it.
	if _, err := os.Lstat(filepath.Join(root, "etc/systemd/system/timers.target.wants/kustodian-renew.timer")); err != nil {
		t.Errorf("kustodian-renew.timer not enabled by the upgrade: %v", err)
	}
}

func TestDebSplitUpgradeInPlace(t *testing.T) {
	t.Parallel()
	splitUpgrade(t, "deb", func(root string, pkgs ...string) (string, error) {
		out, err := exec.Command("dpkg", append([]string{"--root", root, "--force-confold", "-i"}, pkgs...)...).CombinedOutput()
		return string(out), err
	}, func(root, file string) string {
		out, _ := exec.Command("dpkg", "--root", root, "-S", file).Output()
		name, _, _ := strings.Cut(string(out), ":")
		return name
	})
}

func TestRpmSplitUpgradeInPlace(t *testing.T) {
	t.Parallel()
	splitUpgrade(t, "rpm", func(root string, pkgs ...string) (string, error) {
		// No --nodeps: it would also let kustodian-ctl past its Conflicts.
		out, err := exec.Command("rpm", append([]string{"--root", root, "-U"}, pkgs...)...).CombinedOutput()
		return string(out), err
	}, func(root, file string) string {
		out, _ := exec.Command("rpm", "--root", root, "-qf", "--queryformat", "%{NAME}", file).Output()
		return string(out)
	})
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// The role and the playbooks pass Debian's ansible-lint (production profile,
// ansible/.ansible-lint).
func TestAnsibleLint(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("ansible-lint", "--offline", "--nocolor")
	cmd.Dir = filepath.Join("..", "..", "ansible")
	out, err := cmd.CombinedOutput()
	t.Logf("ansible-lint:\n%s", out)
	if err != nil {
		t.Errorf("ansible-lint: %v", err)
	}
	if !strings.Contains(string(out), "Passed with production profile") {
		t.Errorf("ansible-lint did not pass the production profile")
	}
}

// make repo's script on this build's packages, with a throwaway key: the
// APT repository's Release and the RPM repository's metadata carry valid
// signatures of that key, each RPM is signed with it, and a key that is not
// in the keyring is refused by name.
func TestMakeRepo(t *testing.T) {
	t.Parallel()
	stage, out := t.TempDir(), filepath.Join(t.TempDir(), "repo")
	for _, name := range []string{dist.Agent, dist.Ctl} {
		for _, format := range []string{"deb", "rpm"} {
			p := dist.Package(t, name, format)
			run(t, nil, "cp", p, stage)
		}
	}
	script := filepath.Join(dist.RepoRoot(t), "packaging", "make-repo.sh")
	gnupg := filepath.Join(t.TempDir(), "gnupg")
	t.Logf("make-repo.sh:\n%s", run(t, []string{"REPO_GNUPGHOME=" + gnupg, "REPO_KEY="}, script, stage, out))

	keyring := filepath.Join(out, "kustodian.gpg")
	release := filepath.Join(out, "apt", "dists", "stable")
	t.Log(run(t, nil, "gpgv", "--keyring", keyring, filepath.Join(release, "InRelease")))
	t.Log(run(t, nil, "gpgv", "--keyring", keyring, filepath.Join(release, "Release.gpg"), filepath.Join(release, "Release")))
	for _, name := range []string{dist.Agent, dist.Ctl} {
		packages := run(t, nil, "sh", "-c", `cat "$1"/main/binary-amd64/Packages`, "sh", release)
		if !strings.Contains(packages, "Package: "+name+"\n") {
			t.Errorf("the APT repository has no %s:\n%s", name, packages)
		}
	}
	t.Log(run(t, nil, "gpgv", "--keyring", keyring, filepath.Join(out, "rpm", "repodata", "repomd.xml.asc"), filepath.Join(out, "rpm", "repodata", "repomd.xml")))
	db := t.TempDir()
	run(t, nil, "rpmkeys", "--dbpath", db, "--import", filepath.Join(out, "kustodian.asc"))
	rpms, _ := filepath.Glob(filepath.Join(out, "rpm", "*.rpm"))
	if len(rpms) != 2 {
		t.Fatalf("the RPM repository holds %v, want the two packages", rpms)
	}
	for _, rpm := range rpms {
		if got := run(t, nil, "rpmkeys", "--dbpath", db, "--checksig", rpm); !strings.Contains(got, "signatures OK") {
			t.Errorf("rpmkeys --checksig %s: %s", filepath.Base(rpm), got)
		}
	}
	// Tampered metadata fails the check the clients make.
	b, err := os.ReadFile(filepath.Join(release, "Release"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(release, "Release"), append(b, "X-Tampered: yes\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command("gpgv", "--keyring", keyring, filepath.Join(release, "Release.gpg"), filepath.Join(release, "Release")).Run(); err == nil {
		t.Errorf("gpgv accepted a Release changed after its signing")
	}

	cmd := exec.Command(script, stage, filepath.Join(t.TempDir(), "repo"))
	cmd.Env = append(os.Environ(), "GNUPGHOME="+gnupg, "REPO_KEY=0000000000000000DEADBEEF")
	if b, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(b), "REPO_KEY=0000000000000000DEADBEEF: no such secret key") {
		t.Errorf("an unknown REPO_KEY: %v, %s", err, b)
	}
}
