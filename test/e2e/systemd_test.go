package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/cluster"
)

// The units pass systemd-analyze verify, and their hardening scores well.
func TestUnitsVerify(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	h := newHost(t, e, 0)
	h.run("systemd-analyze", "verify", "--man=no", "/lib/systemd/system/kustodian.service", "/lib/systemd/system/kustodian.path")
	out := h.run("systemd-analyze", "security", "--no-pager", "kustodian.service")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	t.Logf("systemd-analyze security: %s", lines[len(lines)-1])
	if !strings.Contains(lines[len(lines)-1], "OK") {
		t.Errorf("exposure is not OK: %s", lines[len(lines)-1])
	}

	// The unit's sandbox hides the cluster's secrets from the agent: the
	// service, with its ExecStart replaced by a probe, cannot read them,
	// but reads what it may.
	secrets := []string{"/etc/kubernetes/pki/ca.key", "/etc/kubernetes/admin.conf", "/etc/kubernetes/bootstrap-kubelet.conf",
		"/var/lib/kubelet/pki/kubelet.key", "/var/lib/kubelet/pki/kubelet-server-current.pem", "/var/lib/etcd/member/snap/db",
		"/var/lib/rancher/k3s/server/token", "/var/lib/rancher/k3s/agent/serving-kubelet.key", "/var/lib/rancher/k3s/agent/k3scontroller.kubeconfig"}
	for _, f := range secrets {
		h.run("sh", "-c", "mkdir -p $(dirname "+f+") && echo secret > "+f+" && chmod 600 "+f)
	}
	// The kubelet's kubeconfig and client certificate, which the drain
	// evicts with (drain.kubeletKubeconfig): kubeadm's are on every test
	// host; k3s's are made here.
	kubelet := []string{"/etc/kubernetes/kubelet.conf", "/var/lib/kubelet/pki/kubelet-client-current.pem",
		"/var/lib/rancher/k3s/agent/kubelet.kubeconfig", "/var/lib/rancher/k3s/agent/client-kubelet.key"}
	for _, f := range kubelet[2:] {
		h.run("sh", "-c", "mkdir -p $(dirname "+f+") && echo secret > "+f+" && chmod 600 "+f)
	}
	readable := append([]string{"/etc/hostname", "/etc/kustodian/config.yaml"}, kubelet...)
	probe := "#!/bin/sh\nfor f in " + strings.Join(append(append([]string{}, secrets...), readable...), " ") +
		"; do if cat $f >/dev/null 2>&1; then echo read $f; else echo hidden $f; fi; done > /var/lib/kustodian/probe\n"
	if err := os.WriteFile(filepath.Join(h.Dir, "usr/local/bin/sandbox-probe"), []byte(probe), 0o755); err != nil {
		t.Fatal(err)
	}
	dropIn := filepath.Join(h.Dir, "etc/systemd/system/kustodian.service.d/probe.conf")
	if err := os.MkdirAll(filepath.Dir(dropIn), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dropIn, []byte("[Service]\nType=oneshot\nExecStart=\nExecStart=/usr/local/bin/sandbox-probe\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.run("systemctl", "daemon-reload")
	h.run("systemctl", "start", "kustodian.service")
	got := h.run("cat", "/var/lib/kustodian/probe")
	for _, f := range secrets {
		if !strings.Contains(got, "hidden "+f) {
			t.Errorf("the agent's unit can read %s:\n%s", f, got)
		}
	}
	for _, f := range readable {
		if !strings.Contains(got, "read "+f) {
			t.Errorf("the probe cannot read %s: it proves nothing\n%s", f, got)
		}
	}
	if max := h.property("kustodian.service", "MemoryMax"); max != "268435456" {
		t.Errorf("MemoryMax=%s, want 256M", max)
	}
	h.run("rm", "-r", "/etc/systemd/system/kustodian.service.d")
	h.run("systemctl", "daemon-reload")
}

// Touching the request on a real systemd host starts the agent through the
// path unit; the node is cordoned and drained, the script goes ahead, and
// removing the request gives the node back; the service exits 0 and the
// path unit waits again. STATUS lines reach systemctl.
func TestPathUnitRunsAMaintenance(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	h := newHost(t, e, 0)
	h.pathUnitReady()
	if s := h.property("kustodian.path", "SubState"); s != "waiting" {
		t.Fatalf("kustodian.path is %q, want waiting", s)
	}
	if s := h.property("kustodian.service", "ActiveState"); s != "inactive" {
		t.Fatalf("kustodian.service is %q before any request", s)
	}

	h.run("sh", "-c", "echo 'kernel upgrade' > /var/maintenance-required")
	h.waitFor("the in-progress file", func() error {
		if !h.exists("var/maintenance-in-progress") {
			return fmt.Errorf("not yet; service %s, status %q", h.property("kustodian.service", "ActiveState"), h.property("kustodian.service", "StatusText"))
		}
		return nil
	})
	node, err := e.Client.CoreV1().Nodes().Get(e.Ctx, h.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !node.Spec.Unschedulable {
		t.Error("node not cordoned while in maintenance")
	}
	h.waitFor("STATUS in systemctl", func() error {
		if s := h.property("kustodian.service", "StatusText"); !strings.HasPrefix(s, "in maintenance for") {
			return fmt.Errorf("StatusText %q", s)
		}
		return nil
	})
	t.Logf("systemctl status:\n%s", h.run("sh", "-c", "systemctl status --no-pager kustodian.service | head -8"))

	h.scriptDone()
	if r := h.property("kustodian.service", "Result"); r != "success" {
		t.Errorf("service result %q, want success", r)
	}
	if s := h.property("kustodian.path", "SubState"); s != "waiting" {
		t.Errorf("kustodian.path is %q after the cycle, want waiting", s)
	}
	// Through the unit's sandbox, the agent found the kubelet's kubeconfig
	// where kubeadm keeps it, and its identity is the node's own.
	if j := h.Journal(e.Ctx, "kustodian.service"); !strings.Contains(j, "evicting with the kubelet's identity") || !strings.Contains(j, "system:node:"+h.Name) {
		t.Errorf("the agent does not evict as the kubelet; journal:\n%s", j)
	}
	if h.exists("var/maintenance-in-progress") {
		t.Error("in-progress file left")
	}
	node, err = e.Client.CoreV1().Nodes().Get(e.Ctx, h.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Spec.Unschedulable {
		t.Error("node still cordoned")
	}
	if _, err := e.Client.CoordinationV1().Leases(e.Namespace).Get(e.Ctx, lock.RecordName(h.Name), metav1.GetOptions{}); err == nil {
		t.Error("record left")
	}
	journal := h.Journal(e.Ctx, "kustodian.service")
	for _, want := range []string{`"to":"InMaintenance"`, "node is Idle; exiting"} {
		if !strings.Contains(journal, want) {
			t.Errorf("journal lacks %s", want)
		}
	}
	if t.Failed() {
		t.Log(journal)
	}
}

// While the agent drains, it holds a logind block inhibitor on shutdown;
// once the node is drained only its delay inhibitor remains.
func TestBlockInhibitorDuringDrain(t *testing.T) {
	t.Parallel()
	e, h, spare := hostWithBlockedDrain(t)
	h.pathUnitReady()
	h.run("touch", "/var/maintenance-required")
	h.waitFor("a drain blocked by the PDB", h.drainBlockedByPDB)
	inhibitors := h.run("systemd-inhibit", "--list", "--no-pager", "--no-legend")
	if !hasInhibitor(inhibitors, "block") || !hasInhibitor(inhibitors, "delay") {
		t.Fatalf("while draining, systemd-inhibit --list shows no block and delay lock of kustodian:\n%s", inhibitors)
	}
	if out, err := h.Exec(e.Ctx, "kustodian", "reboot-gate"); err == nil {
		t.Errorf("the reboot gate opened during a drain: %s", out)
	}

	uncordon(e, spare)
	h.waitFor("the go-ahead", func() error {
		if !h.exists("var/maintenance-in-progress") {
			return fmt.Errorf("no in-progress file")
		}
		return nil
	})
	h.waitFor("the block lock to go", func() error {
		out := h.run("systemd-inhibit", "--list", "--no-pager", "--no-legend")
		if hasInhibitor(out, "block") {
			return fmt.Errorf("still listed:\n%s", out)
		}
		if !hasInhibitor(out, "delay") {
			return fmt.Errorf("the delay lock is gone too:\n%s", out)
		}
		return nil
	})
	h.scriptDone()
	if out := h.run("systemd-inhibit", "--list", "--no-pager", "--no-legend"); strings.Contains(out, "kustodian") {
		t.Errorf("inhibitors left after the agent exited:\n%s", out)
	}
}

// hasInhibitor reports whether systemd-inhibit --list shows a lock of
// kustodian's in mode.
func hasInhibitor(list, mode string) bool {
	for _, line := range strings.Split(list, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && f[0] == "kustodian" && f[len(f)-1] == mode {
			return true
		}
	}
	return false
}

// kustodian reboot-gate opens only with the sentinel, no maintenance and no
// block inhibitor.
func TestRebootGate(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	h := newHost(t, e, 0)
	gate := func(wantOpen bool, why string) {
		t.Helper()
		out, err := h.Exec(e.Ctx, "kustodian", "reboot-gate")
		if (err == nil) != wantOpen {
			t.Errorf("reboot-gate (%s): %v: %s", why, err, out)
		}
		t.Logf("%s: %s", why, strings.TrimSpace(out))
	}
	gate(false, "no sentinel")
	h.run("touch", "/run/reboot-required")
	gate(true, "only the sentinel")
	h.run("systemd-run", "--unit=blocker", "systemd-inhibit", "--what=shutdown", "--mode=block", "--who=test", "--why=testing", "sleep", "infinity")
	h.waitFor("the test's inhibitor", func() error {
		if out := h.run("systemd-inhibit", "--list", "--no-pager"); !strings.Contains(out, "testing") {
			return fmt.Errorf("not listed:\n%s", out)
		}
		return nil
	})
	gate(false, "a block inhibitor")
	h.run("systemctl", "stop", "blocker")
	gate(true, "the inhibitor gone")
	h.run("touch", "/var/maintenance-required")
	gate(false, "maintenance requested")
}

func uncordon(e *cluster.Env, node string) {
	e.T.Helper()
	patch := []byte(`{"spec":{"unschedulable":false}}`)
	if _, err := e.Client.CoreV1().Nodes().Patch(e.Ctx, node, "application/strategic-merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		e.T.Fatalf("uncordoning %s: %v", node, err)
	}
}

// A raw-protocol script reboots its host mid-maintenance with `kustodian
// reboot`: the agent records Rebooting before the host goes down, the lock
// stays held across the reboot, the agent resumes after the boot, and a
// node waiting meanwhile is granted only once the rebooted node is done.
func TestRebootKeepsTheLock(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	h := newHost(t, e, 0)
	waiter := newWaitingAgent(t, e)
	h.pathUnitReady()
	h.run("touch", "/var/maintenance-required")
	h.waitFor("the go-ahead", func() error {
		if !h.exists("var/maintenance-in-progress") {
			return fmt.Errorf("no in-progress file")
		}
		return nil
	})
	tl := recordTimeline(t, e)
	waiter.request()

	if out, err := h.Exec(e.Ctx, "kustodian", "reboot"); err != nil {
		t.Fatalf("kustodian reboot: %v: %s", err, out)
	}
	code, err := h.WaitExit(e.Ctx)
	if err != nil || code != 133 {
		t.Fatalf("nspawn exited %d (%v), want 133 for a reboot", code, err)
	}
	t.Logf("journal before the reboot:\n%s", h.Journal(e.Ctx, "kustodian.service"))
	if got := lockHolder(t, e); got != h.Name {
		t.Fatalf("after the reboot the lock is held by %q, want %s", got, h.Name)
	}
	e.Eventually("Rebooting recorded before the host went down", cluster.DefaultTimeout, func(context.Context) error {
		if tl.State(h.Name) != lock.Rebooting {
			return fmt.Errorf("%s is %s", h.Name, tl.State(h.Name))
		}
		return nil
	})
	events, err := e.Client.CoreV1().Events("default").List(e.Ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + h.Name + ",reason=Rebooting"})
	if err != nil || len(events.Items) == 0 {
		t.Errorf("no Rebooting event (%v)", err)
	}

	if err := h.Boot(e.Ctx); err != nil {
		t.Fatal(err)
	}
	e.Eventually(h.Name+" in maintenance again after the boot", 2*cluster.DefaultTimeout, func(context.Context) error {
		if tl.State(h.Name) != lock.InMaintenance {
			return fmt.Errorf("%s is %s", h.Name, tl.State(h.Name))
		}
		return nil
	})
	if got := lockHolder(t, e); got != h.Name {
		t.Fatalf("the lock is held by %q, want %s", got, h.Name)
	}
	if waiter.inProgress() {
		t.Fatal("the waiting node got the go-ahead during the reboot")
	}
	h.run("rm", "/var/maintenance-required")
	waiter.waitInProgress(e)
	if err := tl.CheckExclusive(1); err != nil {
		t.Fatalf("%v\n%s", err, tl)
	}
	t.Logf("timeline:\n%s", tl)
}

// A managed job that needs a reboot: it runs in a transient unit once the
// node is granted, leaves the reboot sentinel, the agent reboots the host
// keeping the lock, the job runs again after the boot and completes; a node
// waiting meanwhile is granted only after that.
func TestManagedJobWithReboot(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	h := newHost(t, e, 0)
	waiter := newWaitingAgent(t, e)
	script := `#!/bin/sh
set -e
echo "patching $(hostname)"
if [ ! -e /var/lib/patch-applied ]; then
  touch /var/lib/patch-applied
  touch /run/reboot-required
  echo "the new kernel needs a reboot"
fi
echo done
`
	if err := os.WriteFile(filepath.Join(h.Dir, "usr/local/bin/patch.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	h.pathUnitReady()
	tl := recordTimeline(t, e)
	h.run("kustodian", "run", "--id", "kernel-1", "--", "/usr/local/bin/patch.sh")
	e.Eventually(h.Name+" granted", cluster.DefaultTimeout, func(context.Context) error {
		if s := tl.State(h.Name); s != lock.InMaintenance && s != lock.Rebooting {
			return fmt.Errorf("%s is %s", h.Name, s)
		}
		return nil
	})
	waiter.request()

	wctx, cancel := context.WithTimeout(e.Ctx, 2*cluster.DefaultTimeout)
	code, err := h.WaitExit(wctx)
	cancel()
	if err != nil || code != 133 {
		t.Fatalf("nspawn exited %d (%v), want 133: the job should have rebooted the host\n%s", code, err, h.Journal(e.Ctx, ""))
	}
	if got := lockHolder(t, e); got != h.Name {
		t.Fatalf("the lock is held by %q during the reboot, want %s", got, h.Name)
	}
	if waiter.inProgress() {
		t.Fatal("the waiting node got the go-ahead during the reboot")
	}
	if err := h.Boot(e.Ctx); err != nil {
		t.Fatal(err)
	}
	waiter.waitInProgress(e)
	job, err := os.ReadFile(filepath.Join(h.Dir, "var/lib/kustodian/jobs/kernel-1.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(job), `"state": "succeeded"`) || !strings.Contains(string(job), `"runs": 2`) {
		t.Errorf("job record:\n%s", job)
	}
	if h.exists("var/maintenance-required") {
		t.Error("the job's request is still there")
	}
	if err := tl.CheckExclusive(1); err != nil {
		t.Fatalf("%v\n%s", err, tl)
	}
	saw := false
	for _, tr := range tl.Transitions() {
		saw = saw || (tr.Node == h.Name && tr.State == lock.Rebooting)
	}
	if !saw {
		t.Errorf("Rebooting was never recorded:\n%s", tl)
	}
	if out := h.Journal(e.Ctx, ""); !strings.Contains(out, "the new kernel needs a reboot") {
		t.Errorf("the job's output is not in the journal")
	}
	t.Logf("timeline:\n%s", tl)
}

// scriptDone removes the request, as the maintenance script does when it
// is done, and waits for the agent's service to finish.
func (h *host) scriptDone() {
	h.t.Helper()
	h.run("rm", "/var/maintenance-required")
	h.waitFor("the service to finish", func() error {
		if s := h.property("kustodian.service", "ActiveState"); s != "inactive" {
			return fmt.Errorf("service %s (%s)", s, h.property("kustodian.service", "StatusText"))
		}
		return nil
	})
}
