package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kustodian/kustodian/test/buildbin"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/dist"
	"github.com/kustodian/kustodian/test/nodecreds"
	"github.com/kustodian/kustodian/test/nspawn"
)

// binaries is the directory of the static binaries, built once.
func binaries(t *testing.T) string { return buildbin.Dir(t) }

// host is a booted systemd host with Kustodian's .deb installed with apt,
// configured for the test's namespace, whose Node exists in the cluster.
type host struct {
	*nspawn.Host
	e *cluster.Env
	t *testing.T
}

func newHost(t *testing.T, e *cluster.Env, i int) *host {
	t.Helper()
	h := newBareHost(t, e, i)
	h.install()
	return h
}

// newBareHost is a booted host whose Node exists, without Kustodian.
func newBareHost(t *testing.T, e *cluster.Env, i int) *host {
	t.Helper()
	name := fmt.Sprintf("%s-host%d", e.ID, i)
	if err := cluster.CreateNode(e.Ctx, e.Client, name, map[string]string{cluster.LabelTestEnv: e.ID}); err != nil {
		t.Fatal(err)
	}
	return bootHost(t, e, name)
}

// bootHost boots a host named name, without Kustodian.
func bootHost(t *testing.T, e *cluster.Env, name string) *host {
	t.Helper()
	ctx := e.Ctx
	tarball, err := nspawn.Tarball(ctx, testLog{t})
	if err != nil {
		t.Fatal(err)
	}
	h, err := nspawn.NewHost(ctx, tarball, filepath.Join(t.TempDir(), name), name)
	if err != nil {
		t.Fatal(err)
	}
	hh := &host{Host: h, e: e, t: t}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("journal of %s (kustodian):\n%s", name, h.Journal(context.Background(), "kustodian.service"))
		}
		h.Stop(context.Background())
	})
	if err := h.Boot(ctx); err != nil {
		t.Fatal(err)
	}
	return hh
}

// install installs the agent's .deb with apt on the booted host, as an
// operator would, and configures it.
func (h *host) install() {
	t := h.t
	copyFile(t, dist.Package(t, dist.Agent, "deb"), filepath.Join(h.Dir, "root/kustodian.deb"), 0o644)
	h.run("env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-q", "/root/kustodian.deb")
	h.configure()
}

// configure gives the host the node's own kubeconfig and a configuration
// for the test's namespace.
func (h *host) configure() {
	t := h.t
	// The node's own kubeconfig (kustodian-ctl kubeconfig: a token bound to
	// its Node, the CA inlined), as a fleet has it.
	copyFile(t, nodecreds.Kubeconfig(h.e, h.Name), filepath.Join(h.Dir, "etc/kustodian/kubeconfig"), 0o600)
	// The kubelet's kubeconfig and client certificate where kubeadm keeps
	// them: the agent finds them (drain.kubeletKubeconfig auto) and evicts
	// as the kubelet, through the unit's sandbox.
	kubeconfig, certKey := h.e.KubeletFiles(h.Name, "/var/lib/kubelet/pki/kubelet-client-current.pem")
	writeFile(t, filepath.Join(h.Dir, "etc/kubernetes/kubelet.conf"), kubeconfig, 0o600)
	writeFile(t, filepath.Join(h.Dir, "var/lib/kubelet/pki/kubelet-client-current.pem"), certKey, 0o600)
	conf := fmt.Sprintf("namespace: %s\nqueue:\n  heartbeat: 1s\ndrain:\n  evictErrorRetryDelay: 300ms\n", h.e.Namespace)
	if err := os.WriteFile(filepath.Join(h.Dir, "etc/kustodian/config.yaml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
}

// pathUnitReady checks that the package enabled and started kustodian.path.
func (h *host) pathUnitReady() {
	h.t.Helper()
	if got := h.property("kustodian.path", "UnitFileState"); got != "enabled" {
		h.t.Fatalf("kustodian.path is %q after the install, want enabled", got)
	}
	h.waitFor("kustodian.path to be active", func() error {
		if got := h.property("kustodian.path", "ActiveState"); got != "active" {
			return fmt.Errorf("ActiveState %s", got)
		}
		return nil
	})
}

// writeFile writes a file into a host's tree, making its directories.
func writeFile(t *testing.T, path string, b []byte, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, mode); err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}

// run runs a command inside the host and fails the test if it fails. A
// command that the host's reboot cut short (or that found it rebooting)
// runs again once the host is back, if it comes back by itself
// (KeepBooting): every command the tests run this way may run twice.
func (h *host) run(args ...string) string {
	h.t.Helper()
	for {
		boot := h.Boots()
		out, err := h.Exec(h.e.Ctx, args...)
		if err == nil {
			return out
		}
		if errors.Is(err, nspawn.ErrDown) {
			werr := h.WaitBoot(h.e.Ctx, boot, 2*cluster.DefaultTimeout)
			if werr == nil {
				h.t.Logf("%s: %s: the host rebooted under it; again", h.Name, strings.Join(args, " "))
				continue
			}
			err = fmt.Errorf("%w; %v", err, werr)
		}
		h.t.Fatalf("%s: %s: %v\n%s", h.Name, strings.Join(args, " "), err, out)
	}
}

// property reads a unit property with systemctl show.
func (h *host) property(unit, name string) string {
	out, _ := h.Exec(h.e.Ctx, "systemctl", "show", "--value", "-p", name, unit)
	return strings.TrimSpace(out)
}

// exists tells whether a file exists inside the host.
func (h *host) exists(path string) bool {
	_, err := os.Lstat(filepath.Join(h.Dir, path))
	return err == nil
}

func (h *host) waitFor(what string, cond func() error) {
	h.t.Helper()
	h.e.Eventually(h.Name+": "+what, 2*cluster.DefaultTimeout, func(context.Context) error { return cond() })
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
