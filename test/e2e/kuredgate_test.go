package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/kuredproc"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// kuredOnHost runs Kured's own binary (make kured puts it in KURED) on a
// booted host as Kured's pod would: a unit kured.service with in-cluster
// credentials of a ServiceAccount with Kured's RBAC, reboots through the
// host's systemd.
type kuredOnHost struct{ h *host }

func newKuredOnHost(t *testing.T, e *cluster.Env, h *host, namespace string, args ...string) *kuredOnHost {
	t.Helper()
	bin := os.Getenv("KURED")
	if bin == "" {
		t.Fatal("KURED is not set: make test-integration builds Kured's own binary (make kured) and sets it")
	}
	copyFile(t, bin, filepath.Join(h.Dir, "usr/local/bin/kured"), 0o755)
	token, ca := kuredproc.Credentials(t, e, namespace)
	sa := filepath.Join(h.Dir, "root/kured-sa")
	writeFile(t, filepath.Join(sa, "token"), token, 0o600)
	writeFile(t, filepath.Join(sa, "ca.crt"), ca, 0o644)
	writeFile(t, filepath.Join(sa, "namespace"), []byte(namespace), 0o644)
	u, err := url.Parse(e.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	port, err := kuredproc.FreePort() // the host shares this machine's network
	if err != nil {
		t.Fatal(err)
	}
	quoted := make([]string, 0, len(args))
	for _, a := range args {
		quoted = append(quoted, strconv.Quote(a))
	}
	unit := fmt.Sprintf(`[Unit]
Description=Kured, as its DaemonSet's pod on this node
[Service]
Environment=KUBERNETES_SERVICE_HOST=%s KUBERNETES_SERVICE_PORT=%s
ExecStartPre=/bin/sh -c 'mkdir -p /run/secrets/kubernetes.io/serviceaccount && cp /root/kured-sa/* /run/secrets/kubernetes.io/serviceaccount/'
ExecStart=/usr/local/bin/kured --node-id=%s --ds-namespace=%s --ds-name=kured --log-format=text --metrics-host=127.0.0.1 --metrics-port=%d %s
[Install]
WantedBy=multi-user.target
`, u.Hostname(), u.Port(), h.Name, namespace, port, strings.Join(quoted, " "))
	writeFile(t, filepath.Join(h.Dir, "etc/systemd/system/kured.service"), []byte(unit), 0o644)
	h.run("systemctl", "daemon-reload")
	return &kuredOnHost{h: h}
}

// start starts Kured on the host (again after a boot, as its pod is).
func (k *kuredOnHost) start() {
	k.h.t.Helper()
	k.h.run("systemctl", "start", "kured")
}

func (k *kuredOnHost) log() string { return k.h.Journal(k.h.e.Ctx, "kured.service") }

// kuredHolders are the nodes in Kured's lock under key, read with the
// tests' own decoding of Kured's formats (kuredproc.Holders).
func kuredHolders(t *testing.T, e *cluster.Env, namespace, key string) []string {
	t.Helper()
	ds, err := e.Client.AppsV1().DaemonSets(namespace).Get(e.Ctx, "kured", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	holders, err := kuredproc.Holders(ds.Annotations[key])
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return holders
}

// Kured's own binary on a real systemd host, with Kustodian's reboot gate
// as its --reboot-sentinel-command and its own reboot command: while the
// host has asked Kustodian for a maintenance (held back by a pause), the
// gate says no and Kured neither takes its lock nor cordons, though the
// sentinel exists and its lock is free; once the maintenance is done,
// Kured takes its lock, cordons and reboots the host (nspawn exits 133).
// (That Kured gives its lock back after the boot is the integration test
// TestRealKuredAndKustodianTakeTurns': each start of Kured costs 30-90 s.)
func TestKuredRebootsThroughTheGate(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	// Kured's DaemonSet in the test's own namespace, which the host's agent
	// is told (kured.namespace), so that tests beside this one see neither
	// it nor its lock. (TestKuredLockOnAHost keeps the default,
	// kube-system.)
	ns := e.Namespace
	nodecreds.Install(e, ns)
	h := newHost(t, e, 0)
	h.run("sh", "-c", "printf 'kured:\n  namespace: "+ns+"\n' >> /etc/kustodian/config.yaml")
	e.KuredDaemonSet(ns, "")
	kured := newKuredOnHost(t, e, h, ns, "--period=5s", "--reboot-sentinel-command=/usr/bin/kustodian reboot-gate")
	ctl := nodecreds.CtlFor(e)
	if out, err := ctl.Run(e.Ctx, "pause", "--reason", "held for the test"); err != nil {
		t.Fatalf("pause: %v: %s", err, out)
	}
	h.pathUnitReady()
	h.run("touch", "/var/maintenance-required")
	h.run("sh", "-c", "echo '*** System restart required ***' > /run/reboot-required")
	h.waitFor("the request to wait behind the pause", func() error {
		l, err := e.Client.CoordinationV1().Leases(e.Namespace).Get(e.Ctx, lock.RecordName(h.Name), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if r := lock.RecordFromLease(l); r.State != lock.Waiting {
			return fmt.Errorf("record %s: %s", r.State, r.Message)
		}
		return nil
	})

	kured.start()
	h.waitFor("Kured to ask the gate (30-90 s after its start)", func() error {
		if !strings.Contains(kured.log(), "Reboot not required") {
			return fmt.Errorf("Kured has not asked yet")
		}
		return nil
	})
	if holders := kuredHolders(t, e, ns, "weave.works/kured-node-lock"); len(holders) > 0 || nodeUnschedulable(t, e, h.Name) {
		t.Fatalf("Kured went ahead past the gate: lock %v, cordoned %v", holders, nodeUnschedulable(t, e, h.Name))
	}
	if out, err := h.Exec(e.Ctx, "kustodian", "reboot-gate"); err == nil || !strings.Contains(out, "no reboot: maintenance is requested on this node") {
		t.Fatalf("reboot-gate with a request: %v: %s", err, out)
	}

	if out, err := ctl.Run(e.Ctx, "resume"); err != nil {
		t.Fatalf("resume: %v: %s", err, out)
	}
	h.waitFor("the maintenance", func() error {
		if !h.exists("var/maintenance-in-progress") {
			return fmt.Errorf("no in-progress file")
		}
		return nil
	})
	h.run("rm", "/var/maintenance-required") // the script is done
	wctx, cancel := context.WithTimeout(e.Ctx, 2*cluster.DefaultTimeout)
	code, err := h.WaitExit(wctx)
	cancel()
	if err != nil || code != 133 {
		t.Fatalf("nspawn exited %d (%v), want 133: Kured should have rebooted the host\n%s", code, err, kured.log())
	}
	if holders := kuredHolders(t, e, ns, "weave.works/kured-node-lock"); len(holders) != 1 || holders[0] != h.Name || !nodeUnschedulable(t, e, h.Name) {
		t.Fatalf("during Kured's reboot: its lock %v, cordoned %v", holders, nodeUnschedulable(t, e, h.Name))
	}
	if lockHolder(t, e) != "" {
		t.Fatalf("Kustodian's lock is held by %s during Kured's reboot", lockHolder(t, e))
	}
}
