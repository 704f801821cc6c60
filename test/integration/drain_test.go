package integration

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/nodemarks"
	"github.com/kustodian/kustodian/test/cluster"
)

// uncordon makes a node schedulable again.
func uncordon(e *cluster.Env, node string) {
	e.T.Helper()
	patch := []byte(`{"spec":{"unschedulable":false}}`)
	if _, err := e.Client.CoreV1().Nodes().Patch(e.Ctx, node, "application/strategic-merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		e.T.Fatalf("uncordoning %s: %v", node, err)
	}
}

// blockedDrain sets up a node whose drain a PDB blocks: two pods of "db" on
// nodes[0], PDB minAvailable 1, and the only other node cordoned, so that
// the first eviction's replacement cannot run and the second eviction is
// refused until spare is uncordoned.
func blockedDrain(t *testing.T, e *cluster.Env) (target, spare string) {
	t.Helper()
	nodes := e.Nodes(2)
	target, spare = nodes[0], nodes[1]
	e.Cordon(spare)
	e.Deployment("db", 2)
	e.PDB("db", "db", 1)
	for _, p := range e.RunningPods("db", 2) {
		if p.Spec.NodeName != target {
			t.Fatalf("pod %s runs on %s, want %s", p.Name, p.Spec.NodeName, target)
		}
	}
	return target, spare
}

// 4. A PDB blocks the drain until the ReplicaSet's replacement runs
// elsewhere; meanwhile the message names the pod and the PDB.
func TestAgentDrainWaitsForPDB(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	target, spare := blockedDrain(t, e)
	a := newAgent(t, e, target)
	a.request("firmware")
	a.start()

	var blocked string
	waitRecord(e, target, "to report the PDB that blocks it", func(r *lock.Record) error {
		if err := inState(lock.Draining)(r); err != nil {
			return err
		}
		if !strings.Contains(r.Message, "blocked by PDB db") || !strings.Contains(r.Message, e.Namespace+"/db-") {
			return fmt.Errorf("message %q names no pod and PDB", r.Message)
		}
		blocked = r.Message
		return nil
	})
	t.Logf("while blocked: %s", blocked)
	if a.inProgress() {
		t.Fatal("in-progress file created while a pod could not be evicted")
	}

	uncordon(e, spare) // the replacement can run: the PDB allows the next eviction
	a.waitInProgress(cluster.DefaultTimeout)
	for _, p := range e.RunningPods("db", 2) {
		if p.Spec.NodeName != spare {
			t.Errorf("pod %s runs on %s, want %s", p.Name, p.Spec.NodeName, spare)
		}
	}
	a.completes()
}

// 7. A node an admin cordoned before maintenance stays cordoned after it.
func TestAgentKeepsAnAdminCordon(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(1)
	e.Cordon(nodes[0])
	a := newAgent(t, e, nodes[0])
	a.request("upgrade")
	a.start()
	a.waitInProgress(cluster.DefaultTimeout)
	if _, ours := nodeObject(e, nodes[0]).Annotations[nodemarks.AnnotationCordoned]; ours {
		t.Error("Kustodian claimed an admin's cordon")
	}
	a.completes()
	if !nodeObject(e, nodes[0]).Spec.Unschedulable {
		t.Error("the admin's cordon was lifted")
	}
}

// A drain that outlasts drain.timeout fails the maintenance (with the
// default drain.onTimeout hold): the node stays cordoned, the lock stays
// held, and the record and a MaintenanceFailed Event say why.
func TestDrainTimeoutHoldsTheLock(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	e.Cordon(nodes[1])
	e.Deployment("db", 2)
	e.PDB("db", "db", 1)
	for _, p := range e.RunningPods("db", 2) {
		if p.Spec.NodeName != nodes[0] {
			t.Fatalf("pod %s on %s, want %s", p.Name, p.Spec.NodeName, nodes[0])
		}
	}
	// nodes[1] stays cordoned: the second pod has nowhere to go, and the
	// PDB keeps the drain from evicting it.
	a := newAgent(t, e, nodes[0], "--drain-timeout", "3s")
	a.request("kernel")
	a.start()
	waitRecord(e, nodes[0], "Failed by the drain timeout", inStateSaying(lock.Failed, "drain failed"))
	eventSays(e, nodes[0], "MaintenanceFailed", "drain failed")
	if h := lockHolder(e); h != nodes[0] || !nodeObject(e, nodes[0]).Spec.Unschedulable {
		t.Errorf("after the drain timeout: holder %q, cordoned %v", h, nodeObject(e, nodes[0]).Spec.Unschedulable)
	}
	if a.inProgress() {
		t.Error("the script got the go-ahead on a node that is not drained")
	}
}
