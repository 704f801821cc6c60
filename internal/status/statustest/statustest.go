// Package statustest has a fixture for tests of the status and its printers.
package statustest

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/status"
)

// Now is the fixture's time.
var Now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// Fixture is a cluster in mid-rollout: n1 in maintenance holding the lock,
// n2 and n3 waiting (n3 first by arrival), n4 waiting with a dead agent,
// n5 cordoned by an admin, n6 idle; paused; Kured installed with a holder.
func Fixture() status.Inputs {
	record := func(node string, state lock.State, key string, age time.Duration, msg string) coordv1.Lease {
		l := coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.RecordName(node), ResourceVersion: key}}
		lock.Record{Node: node, State: state, Since: Now.Add(-3 * time.Minute), Reason: "kernel 6.1", Message: msg,
			RequestID: "req-" + node, Group: "default", QueueKey: key, Requested: Now.Add(-5 * time.Minute), Heartbeat: Now.Add(-age)}.ApplyTo(&l)
		return l
	}
	gated := func(l coordv1.Lease) coordv1.Lease {
		l.Annotations[lock.AnnotationGates] = `[{"gate":"paused","verdict":"open"},{"gate":"window","verdict":"open"},` +
			`{"gate":"queue","verdict":"closed","reason":"position 1 of 2, lock held by n1 (InMaintenance)"},{"gate":"spacing","verdict":"unchecked"}]`
		return l
	}
	holder := "n1"
	acquired := metav1.NewMicroTime(Now.Add(-2 * time.Minute))
	node := func(name string, unschedulable bool, ours bool) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}
		n.Spec.Unschedulable = unschedulable
		if ours {
			n.Annotations[lock.AnnotationCordoned] = "true"
			// As its agent sets them in maintenance.
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
				{Type: corev1.NodeMaintenancePlanned, Status: corev1.ConditionFalse},
				{Type: corev1.NodeDrained, Status: corev1.ConditionTrue}, {Type: corev1.NodeMaintenanceInProgress, Status: corev1.ConditionTrue}}
		}
		return n
	}
	return status.Inputs{
		Namespace: "kustodian",
		Now:       Now,
		Leases: []coordv1.Lease{
			{ObjectMeta: metav1.ObjectMeta{Name: "lock-default-0"}, Spec: coordv1.LeaseSpec{HolderIdentity: &holder, AcquireTime: &acquired}},
			record("n1", lock.InMaintenance, "100", time.Second, "in maintenance: waiting for the script to remove /var/maintenance-required"),
			record("n2", lock.Waiting, "300", 2*time.Second, "waiting: position 2 of 2, lock held by n1 (InMaintenance)"),
			gated(record("n3", lock.Waiting, "200", 3*time.Second, "waiting: position 1 of 2, lock held by n1 (InMaintenance)")),
			record("n4", lock.Waiting, "150", time.Hour, "waiting: position 1 of 3, lock held by n1"),
		},
		Nodes:      []corev1.Node{node("n1", true, true), node("n2", false, false), node("n3", false, false), node("n5", true, false), node("n6", false, false)},
		Control:    &corev1.ConfigMap{Data: map[string]string{"paused": "true", "reason": "incident 42"}},
		Kured:      &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{kured.LockAnnotation: `{"nodeID":"kustodian:n1","created":"2026-11-22T11:58:00Z","TTL":0}`}}},
		StaleAfter: status.DefaultStaleAfter,
	}
}
