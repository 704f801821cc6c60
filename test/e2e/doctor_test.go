package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/test/cluster"
)

type doctorReport struct {
	Node     string `json:"node"`
	Status   string `json:"status"`
	Findings []struct {
		Check, Status, Message, Fix string
	} `json:"findings"`
}

// doctor runs kustodian doctor -o json on the host and returns its report
// and exit code.
func (h *host) doctor() (doctorReport, int) {
	h.t.Helper()
	out, err := h.Exec(h.e.Ctx, "kustodian", "doctor", "-o", "json")
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		h.t.Fatalf("kustodian doctor: %v\n%s", err, out)
	}
	var r doctorReport
	if err := json.Unmarshal([]byte(out[max(0, strings.Index(out, "{")):]), &r); err != nil {
		h.t.Fatalf("kustodian doctor -o json: %v\n%s", err, out)
	}
	return r, code
}

func (r doctorReport) String() string {
	var b strings.Builder
	for _, f := range r.Findings {
		fmt.Fprintf(&b, "%s %s: %s (fix: %s)\n", f.Status, f.Check, f.Message, f.Fix)
	}
	return b.String()
}

// The host of kubernetes#102818: the kubelet's shutdownGracePeriod is 60 s
// and its drop-in asks logind for that, but unattended-upgrades' drop-in
// (30 s) sorts after it and wins. kustodian doctor reports it, naming the
// file, with the drop-in to write; written as it says (and logind and the
// kubelet restarted), every check passes.
func TestDoctorFindsTheShortInhibitDelay(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	h := newHost(t, e, 0)
	// Kured's DaemonSet is looked for where this installation lets the
	// agents read it.
	h.run("sh", "-c", "printf 'kured:\n  namespace: "+e.Namespace+"\n' >> /etc/kustodian/config.yaml")
	writeFile(t, filepath.Join(h.Dir, "var/lib/kubelet/config.yaml"),
		[]byte("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nshutdownGracePeriod: 60s\nshutdownGracePeriodCriticalPods: 20s\n"), 0o644)
	writeFile(t, filepath.Join(h.Dir, "etc/systemd/logind.conf.d/99-kubelet.conf"), []byte("[Login]\nInhibitDelayMaxSec=60\n"), 0o644)
	writeFile(t, filepath.Join(h.Dir, "usr/lib/systemd/logind.conf.d/unattended-upgrades-logind-maxdelay.conf"), []byte("[Login]\nInhibitDelayMaxSec=30\n"), 0o644)
	h.run("systemctl", "restart", "systemd-logind")
	// The kubelet's delay inhibitor, as it takes it at its start.
	kubelets := 0
	startKubelet := func() {
		kubelets++
		unit := fmt.Sprintf("kubelet-%d", kubelets)
		h.run("systemd-run", "--unit="+unit, "--collect", "systemd-inhibit", "--what=shutdown", "--mode=delay", "--who=kubelet",
			"--why=Kubelet needs time to handle node shutdown", "sleep", "infinity")
		// Its inhibitor would hold the host's poweroff at the test's end
		// for the 60 s it allows, past the host's stop (which then kills
		// it, and its root file system was seen still written to as the
		// test's temporary directory was removed): let it go first.
		t.Cleanup(func() { _, _ = h.Exec(context.Background(), "systemctl", "stop", unit) })
		h.waitFor("the kubelet's inhibitor", func() error {
			if out, _ := h.Exec(h.e.Ctx, "systemd-inhibit", "--list", "--no-legend"); !strings.Contains(out, "kubelet") {
				return fmt.Errorf("inhibitors: %s", out)
			}
			return nil
		})
	}
	startKubelet()

	r, code := h.doctor()
	var delay *struct{ Check, Status, Message, Fix string }
	for i := range r.Findings {
		if r.Findings[i].Check == "logind-inhibit-delay" {
			delay = &r.Findings[i]
		}
	}
	if code != 2 || r.Status != "fail" || delay == nil || delay.Status != "fail" ||
		!strings.Contains(delay.Message, "logind's InhibitDelayMaxSec 30s (set by /usr/lib/systemd/logind.conf.d/unattended-upgrades-logind-maxdelay.conf: unattended-upgrades' override, which sorts after 99-kubelet.conf and wins over it) is shorter than the kubelet's shutdownGracePeriod 1m0s") {
		t.Fatalf("doctor exited %d:\n%s", code, r)
	}
	const fix = `write /etc/systemd/logind.conf.d/zz-kustodian.conf with "[Login]\nInhibitDelayMaxSec=60"`
	if !strings.Contains(delay.Fix, fix) || !strings.Contains(delay.Fix, "systemctl restart systemd-logind") {
		t.Fatalf("fix %q, want %q", delay.Fix, fix)
	}

	// The agent says it too, when it starts.
	h.run("systemctl", "start", "kustodian.service")
	h.waitFor("the agent's warning", func() error {
		if j := h.Journal(h.e.Ctx, "kustodian.service"); !strings.Contains(j, "host check: logind's InhibitDelayMaxSec 30s") {
			return fmt.Errorf("not in the journal:\n%s", j)
		}
		return nil
	})

	// At its start the agent also labels the Node: its kubelet's
	// kubeconfig works as this node's kubelet.
	h.waitFor("the Node's label kustodian.io/kubelet-evictions=ready", func() error {
		n, err := e.Client.CoreV1().Nodes().Get(e.Ctx, h.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := n.Labels["kustodian.io/kubelet-evictions"]; got != "ready" {
			return fmt.Errorf("label %q", got)
		}
		return nil
	})

	// The fix, as it says.
	h.run("sh", "-c", `printf '[Login]\nInhibitDelayMaxSec=60\n' > /etc/systemd/logind.conf.d/zz-kustodian.conf`)
	h.run("systemctl", "restart", "systemd-logind")
	h.run("systemctl", "stop", "kubelet-1")
	startKubelet()
	r, code = h.doctor()
	if code != 0 || r.Status != "ok" || r.Node != h.Name {
		t.Fatalf("after the fix doctor exited %d (node %q):\n%s", code, r.Node, r)
	}
	t.Logf("after the fix:\n%s", r)
}
