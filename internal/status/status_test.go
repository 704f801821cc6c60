package status

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/internal/lock"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// Fixture is a cluster in mid-rollout: n1 in maintenance holding the lock,
// n2 and n3 waiting (n3 first by arrival), n4 waiting with a dead agent,
// n5 cordoned by an admin, n6 idle; paused; Kured installed with a holder.
func Fixture() Inputs {
	record := func(node string, state lock.State, key string, age time.Duration, msg string) coordv1.Lease {
		l := coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.RecordName(node), ResourceVersion: key}}
		lock.Record{Node: node, State: state, Since: now.Add(-3 * time.Minute), Reason: "kernel 6.1", Message: msg,
			RequestID: "req-" + node, Group: "default", QueueKey: key, Requested: now.Add(-5 * time.Minute), Heartbeat: now.Add(-age)}.ApplyTo(&l)
		return l
	}
	holder := "n1"
	acquired := metav1.NewMicroTime(now.Add(-2 * time.Minute))
	node := func(name string, unschedulable bool, ours bool) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}
		n.Spec.Unschedulable = unschedulable
		if ours {
			n.Annotations[lock.AnnotationCordoned] = "true"
		}
		return n
	}
	return Inputs{
		Namespace: "kustodian",
		Now:       now,
		Leases: []coordv1.Lease{
			{ObjectMeta: metav1.ObjectMeta{Name: "lock-default-0"}, Spec: coordv1.LeaseSpec{HolderIdentity: &holder, AcquireTime: &acquired}},
			record("n1", lock.InMaintenance, "100", time.Second, "in maintenance: waiting for the script to remove /var/maintenance-required"),
			record("n2", lock.Waiting, "300", 2*time.Second, "waiting: position 2 of 2, lock held by n1 (InMaintenance for 2m0s)"),
			record("n3", lock.Waiting, "200", 3*time.Second, "waiting: position 1 of 2, lock held by n1 (InMaintenance for 2m0s)"),
			record("n4", lock.Waiting, "150", time.Hour, "waiting: position 1 of 3, lock held by n1"),
		},
		Nodes:      []corev1.Node{node("n1", true, true), node("n2", false, false), node("n3", false, false), node("n5", true, false), node("n6", false, false)},
		Control:    &corev1.ConfigMap{Data: map[string]string{"paused": "true", "reason": "incident 42"}},
		Kured:      &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{kured.LockAnnotation: `{"nodeID":"kustodian:n1","created":"2026-11-22T11:58:00Z","TTL":0}`}}},
		StaleAfter: DefaultStaleAfter,
	}
}

func TestBuild(t *testing.T) {
	s := Build(Fixture())
	if !s.Paused || s.PausedReason != "incident 42" || s.APIVersion != APIVersion || s.Kind != Kind {
		t.Errorf("header: %+v", s)
	}
	if len(s.Locks) != 1 || s.Locks[0].Holder != "n1" || s.Locks[0].Group != "default" || s.Locks[0].Since == nil {
		t.Errorf("locks: %+v", s.Locks)
	}
	if s.Kured == nil || len(s.Kured.Holders) != 1 || s.Kured.Holders[0] != "kustodian:n1" {
		t.Errorf("kured: %+v", s.Kured)
	}
	var order []string
	for _, n := range s.Nodes {
		order = append(order, n.Name+"="+string(n.State))
	}
	byName := map[string]Node{}
	for _, n := range s.Nodes {
		byName[n.Name] = n
	}
	if byName["n3"].QueuePosition != 1 || byName["n2"].QueuePosition != 2 || byName["n4"].QueuePosition != 0 {
		t.Errorf("queue positions n3=%d n2=%d n4=%d, want 1, 2, 0 (dead)", byName["n3"].QueuePosition, byName["n2"].QueuePosition, byName["n4"].QueuePosition)
	}
	if byName["n4"].Live || !byName["n3"].Live {
		t.Error("liveness wrong")
	}
	if byName["n1"].CordonedBy != "kustodian" || byName["n5"].CordonedBy != "other" || byName["n6"].CordonedBy != "" {
		t.Errorf("cordoned by: n1=%q n5=%q n6=%q", byName["n1"].CordonedBy, byName["n5"].CordonedBy, byName["n6"].CordonedBy)
	}
	if byName["n4"].HasNode {
		t.Error("n4 has no Node object")
	}
	if got, want := strings.Join(order, " "), "n1=InMaintenance n3=Waiting n2=Waiting n4=Waiting n5=Idle n6=Idle"; got != want {
		t.Errorf("order %s, want %s", got, want)
	}
	var queue []string
	for _, n := range s.Queue() {
		queue = append(queue, n.Name)
	}
	if got := queue; len(got) != 3 || got[0] != "n3" || got[1] != "n2" || got[2] != "n4" {
		t.Errorf("queue %v, want [n3 n2 n4]", got)
	}
}
