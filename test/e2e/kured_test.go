package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// Kured as it is installed (DaemonSet kube-system/kured) and its lock as
// Kured writes it: the host's agent waits while another node holds it and
// holds it itself during its maintenance.
func TestKuredLockOnAHost(t *testing.T) {
	e := cluster.New(t)
	nodecreds.Install(e, "kube-system")
	h := newHost(t, e, 0)
	held := `{"nodeID":"other-node","metadata":{"unschedulable":false},"created":"` + time.Now().UTC().Format(time.RFC3339) + `","TTL":0}`
	e.KuredDaemonSet("kube-system", held)
	dss := e.Client.AppsV1().DaemonSets("kube-system")
	annotation := func() string {
		got, err := dss.Get(e.Ctx, "kured", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.Annotations[kured.LockAnnotation]
	}

	h.pathUnitReady()
	h.run("touch", "/var/maintenance-required")
	h.waitFor("to wait for Kured", func() error {
		l, err := e.Client.CoordinationV1().Leases(e.Namespace).Get(e.Ctx, lock.RecordName(h.Name), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if r := lock.RecordFromLease(l); r.State != lock.Waiting || !strings.Contains(r.Message, "Kured's lock is held by other-node") {
			return fmt.Errorf("record %s: %s", r.State, r.Message)
		}
		return nil
	})
	if h.exists("var/maintenance-in-progress") {
		t.Fatal("maintenance started while Kured reboots a node")
	}
	got, err := dss.Get(e.Ctx, "kured", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(got.Annotations, kured.LockAnnotation) // Kured is done
	if _, err := dss.Update(e.Ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.waitFor("the go-ahead", func() error {
		if !h.exists("var/maintenance-in-progress") {
			return fmt.Errorf("no in-progress file")
		}
		return nil
	})
	if a := annotation(); !strings.Contains(a, `"nodeID":"kustodian:`+h.Name+`"`) {
		t.Errorf("Kured's lock during maintenance: %q", a)
	}
	h.run("rm", "/var/maintenance-required")
	h.waitFor("Kured's lock to be given back", func() error {
		if a := annotation(); a != "" {
			return fmt.Errorf("annotation %q", a)
		}
		return nil
	})
}

// hostWithBlockedDrain is a host whose drain blocks once it starts: two
// pods of Deployment db on its node, a PDB that lets one go at a time, and
// the only other node (spare) cordoned, until the test uncordons it.
func hostWithBlockedDrain(t *testing.T) (*cluster.Env, *host, string) {
	t.Helper()
	e := cluster.New(t)
	spare := e.Nodes(1)[0]
	h := newHost(t, e, 0)
	e.Cordon(spare)
	e.Deployment("db", 2)
	e.PDB("db", "db", 1)
	for _, p := range e.RunningPods("db", 2) {
		if p.Spec.NodeName != h.Name {
			t.Fatalf("pod %s on %s, want %s", p.Name, p.Spec.NodeName, h.Name)
		}
	}
	return e, h, spare
}

// drainBlockedByPDB is nil once the host's record says its drain waits
// on PDB db.
func (h *host) drainBlockedByPDB() error {
	l, err := h.e.Client.CoordinationV1().Leases(h.e.Namespace).Get(h.e.Ctx, lock.RecordName(h.Name), metav1.GetOptions{})
	if err != nil {
		return err
	}
	if r := lock.RecordFromLease(l); r.State != lock.Draining || !strings.Contains(r.Message, "blocked by PDB db") {
		return fmt.Errorf("record %s: %s", r.State, r.Message)
	}
	return nil
}
