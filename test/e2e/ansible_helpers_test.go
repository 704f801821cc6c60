package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kustodian/kustodian/test/dist"
)

// freePort is a TCP port on 127.0.0.1 that nothing listens on now.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// buildDeb builds a tiny Debian package with dpkg-deb.
func buildDeb(t *testing.T, dir, name, version string) string {
	t.Helper()
	root := filepath.Join(dir, name+"-"+version)
	control := fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: all\nMaintainer: Kustodian tests <tests@example.com>\nDescription: a package the example maintenance upgrades\n", name, version)
	for path, content := range map[string]string{
		"DEBIAN/control":                 control,
		"usr/share/" + name + "/version": version + "\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	deb := filepath.Join(dir, fmt.Sprintf("%s_%s_all.deb", name, version))
	if out, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", root, deb).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb: %v\n%s", err, out)
	}
	return deb
}

// sshKeyPair makes an ed25519 key pair without a passphrase at key (and
// key.pub) and returns the public key's line.
func sshKeyPair(t *testing.T, key string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(key), 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return string(pub)
}

// newerBuild repacks the .deb with a higher version: a newer package build.
func newerBuild(t *testing.T, deb, dir string) (string, string) {
	t.Helper()
	root, err := os.MkdirTemp(dir, "repack-")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("dpkg-deb", "--raw-extract", deb, root).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -R: %v\n%s", err, out)
	}
	controlPath := filepath.Join(root, "DEBIAN", "control")
	b, err := os.ReadFile(controlPath)
	if err != nil {
		t.Fatal(err)
	}
	var name, version string
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		if v, ok := strings.CutPrefix(l, "Version: "); ok {
			version = v + ".1"
			lines[i] = "Version: " + version
		}
		if n, ok := strings.CutPrefix(l, "Package: "); ok {
			name = n
		}
	}
	if err := os.WriteFile(controlPath, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name+"_"+version+"_linux_amd64.deb")
	if b, err := exec.Command("dpkg-deb", "--root-owner-group", "--build", root, out).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -b: %v\n%s", err, b)
	}
	return out, version
}

// playbook runs ansible-playbook from the repository's ansible/ directory.
func playbook(t *testing.T, inventory, name string, extra ...string) string {
	t.Helper()
	out, err := runPlaybook(t, inventory, name, extra...)
	if err != nil {
		t.Fatalf("ansible-playbook %s: %v", name, err)
	}
	return out
}

func runPlaybook(t *testing.T, inventory, name string, extra ...string) (string, error) {
	t.Helper()
	return runPlaybookIn(t, "", inventory, name, extra...)
}

// runPlaybookIn runs ansible-playbook in dir (the test's own directory when
// "").
func runPlaybookIn(t *testing.T, dir, inventory, name string, extra ...string) (string, error) {
	t.Helper()
	args := append([]string{"-i", inventory, filepath.Join(dist.RepoRoot(t), "ansible", name)}, extra...)
	cmd := exec.Command("ansible-playbook", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"ANSIBLE_HOST_KEY_CHECKING=False",
		"ANSIBLE_SSH_ARGS=-o ControlMaster=auto -o ControlPersist=30s -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no",
		"ANSIBLE_PYTHON_INTERPRETER=/usr/bin/python3",
		"ANSIBLE_NOCOLOR=1",
		"ANSIBLE_RETRY_FILES_ENABLED=False",
		"ANSIBLE_LOCAL_TEMP="+t.TempDir(),
		"ANSIBLE_CONFIG="+filepath.Join(dist.RepoRoot(t), "ansible", "ansible.cfg"),
	)
	if dir != "" {
		cmd.Env = append(cmd.Env, "PWD="+dir) // as a shell sets it
	}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	shown := string(out)
	if err == nil {
		shown = lastLinesOf(shown, 80)
	}
	t.Logf("ansible-playbook %s (%s):\n%s", name, time.Since(start).Round(100*time.Millisecond), shown)
	return string(out), err
}

func lastLinesOf(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
