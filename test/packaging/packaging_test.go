// Package packaging tests the .deb and .rpm that `make packages` builds into
// dist/: the linters, their contents, and an RPM installed into a scratch
// root. The end-to-end tests install the .deb on booted hosts.
package packaging

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
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

// What both packages must hold.
var wantFiles = []string{
	"/usr/bin/kustodian",
	"/usr/bin/kustodian-ctl",
	"/usr/bin/kustodian-notify",
	"/usr/bin/kubectl-kustodian",
	"/lib/systemd/system/kustodian.path",
	"/lib/systemd/system/kustodian.service",
	"/etc/kustodian/config.yaml",
	"/usr/share/man/man1/kustodian.1.gz",
	"/usr/share/man/man1/kustodian-agent.1.gz",
	"/usr/share/man/man1/kustodian-ctl.1.gz",
	"/usr/share/man/man1/kustodian-ctl-status.1.gz",
	"/usr/share/bash-completion/completions/kustodian",
	"/usr/share/bash-completion/completions/kustodian-ctl",
	"/usr/share/fish/vendor_completions.d/kustodian-ctl.fish",
	"/usr/share/doc/kustodian/README.md",
	"/usr/share/doc/kustodian/docs/security.md",
	"/usr/share/doc/kustodian/examples/readme-maintenance.sh",
}

func TestDebLintianAndContents(t *testing.T) {
	deb := dist.Package(t, "deb")
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
	t.Logf("lintian:\n%s", out)

	listing := run(t, nil, "dpkg", "-c", deb)
	for _, f := range append(wantFiles, "/usr/share/zsh/vendor-completions/_kustodian-ctl", "/usr/share/doc/kustodian/copyright", "/usr/share/doc/kustodian/changelog.gz") {
		if !strings.Contains(listing, "."+f) {
			t.Errorf("dpkg -c lacks %s", f)
		}
	}
	// notify.urls hold tokens: the configuration is root's alone.
	if !regexp.MustCompile(`(?m)^-rw------- root/root .* \./etc/kustodian/config\.yaml$`).MatchString(listing) {
		t.Errorf("/etc/kustodian/config.yaml is not -rw------- root/root:\n%s", listing)
	}
	if !regexp.MustCompile(`\./usr/bin/kubectl-kustodian -> kustodian-ctl`).MatchString(listing) {
		t.Errorf("kubectl-kustodian is not a link to kustodian-ctl:\n%s", listing)
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
	rpm := dist.Package(t, "rpm")
	cmd := exec.Command("rpmlint", "-r", filepath.Join("..", "..", "packaging", "rpmlintrc"), rpm)
	cmd.Env = append(os.Environ(), "PATH="+cpioWrapper(t)+":"+os.Getenv("PATH"))
	out, _ := cmd.CombinedOutput()
	t.Logf("rpmlint:\n%s", out)
	if !strings.Contains(string(out), " 0 errors") {
		t.Errorf("rpmlint reports errors")
	}
	listing := run(t, nil, "rpm", "-qpl", rpm)
	for _, f := range append(wantFiles, "/usr/share/zsh/site-functions/_kustodian-ctl", "/usr/share/licenses/kustodian/LICENSE") {
		if !strings.Contains(listing, f+"\n") {
			t.Errorf("rpm -qpl lacks %s", f)
		}
	}
	if config := run(t, nil, "rpm", "-qpc", rpm); strings.TrimSpace(config) != "/etc/kustodian/config.yaml" {
		t.Errorf("rpm -qpc: %q, want /etc/kustodian/config.yaml", config)
	}
}

// rpm -i --root into a scratch Debian root (no systemd running there): the
// files land, the scriptlets enable the path unit without starting
// anything; rpm -e removes both.
func TestRpmInstallIntoScratchRoot(t *testing.T) {
	rpm := dist.Package(t, "rpm")
	tarball, err := nspawn.Tarball(context.Background(), testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	run(t, nil, "tar", "-C", root, "-xf", tarball)
	// The root's rpm database knows nothing of Debian's packages.
	out := run(t, nil, "rpm", "--root", root, "--nodeps", "-i", rpm)
	t.Logf("rpm -i:\n%s", out)
	for _, f := range wantFiles {
		if _, err := os.Lstat(filepath.Join(root, f)); err != nil {
			t.Errorf("not installed: %s", f)
		}
	}
	link := filepath.Join(root, "etc/systemd/system/multi-user.target.wants/kustodian.path")
	if _, err := os.Lstat(link); err != nil {
		t.Errorf("kustodian.path not enabled: %v", err)
	}
	if got := strings.TrimSpace(run(t, nil, "rpm", "--root", root, "-q", "kustodian")); !strings.HasPrefix(got, "kustodian-") {
		t.Errorf("rpm -q: %q", got)
	}
	run(t, nil, "rpm", "--root", root, "-e", "kustodian")
	for _, f := range append(wantFiles, "etc/systemd/system/multi-user.target.wants/kustodian.path") {
		if _, err := os.Lstat(filepath.Join(root, f)); err == nil {
			t.Errorf("left after rpm -e: %s", f)
		}
	}
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// The role and the playbooks pass Debian's ansible-lint (production profile,
// ansible/.ansible-lint).
func TestAnsibleLint(t *testing.T) {
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
