package e2e

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/cluster"
)

// The units pass systemd-analyze verify, and their hardening scores well.
func TestUnitsVerify(t *testing.T) {
	e := cluster.New(t)
	h := newHost(t, e, 0)
	h.run("systemd-analyze", "verify", "--man=no", "/usr/lib/systemd/system/kustodian.service", "/usr/lib/systemd/system/kustodian.path")
	out := h.run("systemd-analyze", "security", "--no-pager", "kustodian.service")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	t.Logf("systemd-analyze security: %s", lines[len(lines)-1])
	if !strings.Contains(lines[len(lines)-1], "OK") {
		t.Errorf("exposure is not OK: %s", lines[len(lines)-1])
	}
}

// Touching the request on a real systemd host starts the agent through the
// path unit; the node is cordoned and drained, the script goes ahead, and
// removing the request gives the node back; the service exits 0 and the
// path unit waits again. STATUS lines reach systemctl.
func TestPathUnitRunsAMaintenance(t *testing.T) {
	e := cluster.New(t)
	h := newHost(t, e, 0)
	h.run("systemctl", "enable", "--now", "kustodian.path")
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

	h.run("rm", "/var/maintenance-required")
	h.waitFor("the service to finish", func() error {
		if s := h.property("kustodian.service", "ActiveState"); s != "inactive" {
			return fmt.Errorf("service %s (%s)", s, h.property("kustodian.service", "StatusText"))
		}
		return nil
	})
	if r := h.property("kustodian.service", "Result"); r != "success" {
		t.Errorf("service result %q, want success", r)
	}
	if s := h.property("kustodian.path", "SubState"); s != "waiting" {
		t.Errorf("kustodian.path is %q after the cycle, want waiting", s)
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
