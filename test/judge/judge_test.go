package judge

import (
	"context"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
)

func record(node, state, policy, group string) *coordv1.Lease {
	a := map[string]string{annState: state, annMessage: "why: " + state}
	if policy != "" {
		a[annPolicy] = policy
	}
	if group != "" {
		a[annGroup] = group
	}
	return &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: recordPrefix + node, Namespace: "k", Annotations: a}, Spec: coordv1.LeaseSpec{HolderIdentity: &node}}
}

func newJudge(rules Rules) *Judge {
	return &Judge{
		namespace: "k", rules: rules, start: time.Now(),
		state: map[string]string{}, group: map[string]string{}, asked: map[string]bool{},
		pods: map[string]*corev1.Pod{}, pdbs: map[string]*policyv1.PodDisruptionBudget{}, reached: map[string]bool{},
	}
}

// cycle is one node's whole maintenance, record by record.
func cycle(j *Judge, node, policy, group string) {
	for _, s := range []string{waiting, draining, inMaintenance, completing} {
		j.lease(watch.Modified, record(node, s, policy, group))
	}
	j.lease(watch.Deleted, record(node, completing, policy, group))
}

func TestLegalCyclesPass(t *testing.T) {
	j := newJudge(Rules{})
	cycle(j, "a", "", "")
	cycle(j, "b", "", "")
	j.lease(watch.Modified, record("c", waiting, "", ""))
	j.lease(watch.Modified, record("c", draining, "", ""))
	j.lease(watch.Modified, record("c", failed, "", ""))
	j.lease(watch.Modified, record("c", draining, "", "")) // restarted: drains again
	if v := j.Violations(); len(v) != 0 {
		t.Fatalf("violations: %v", v)
	}
}

func TestTwoActiveInOneSlotIsAViolation(t *testing.T) {
	j := newJudge(Rules{})
	j.lease(watch.Added, record("a", waiting, "", ""))
	j.lease(watch.Added, record("b", waiting, "", ""))
	j.lease(watch.Modified, record("a", draining, "", ""))
	j.lease(watch.Modified, record("b", draining, "", ""))
	if v := j.Violations(); len(v) != 1 || !strings.Contains(v[0], "2 nodes of group default active at once, 1 slots: [a b]") {
		t.Fatalf("violations: %v", v)
	}
}

func TestSlotsAreCountedPerGroup(t *testing.T) {
	j := newJudge(Rules{Slots: map[string]int{"zones/a": 2}})
	for _, n := range []string{"a1", "a2", "b1"} {
		grp := n[:1]
		j.lease(watch.Added, record(n, waiting, "zones", grp))
		j.lease(watch.Modified, record(n, draining, "zones", grp))
	}
	if v := j.Violations(); len(v) != 0 {
		t.Fatalf("two of a's two slots and one of b's one: %v", v)
	}
	j.lease(watch.Added, record("b2", waiting, "zones", "b"))
	j.lease(watch.Modified, record("b2", inMaintenance, "zones", "b"))
	if v := j.Violations(); len(v) == 0 || !strings.Contains(strings.Join(v, "\n"), "group zones/b") {
		t.Fatalf("two in b's one slot passed: %v", v)
	}
}

func TestIllegalTransitionsAreViolations(t *testing.T) {
	for _, tc := range []struct{ steps []string }{
		{[]string{waiting, draining, inMaintenance, completing, idle, completing}}, // a finished node comes back
		{[]string{waiting, inMaintenance}},                                         // maintenance without a drain
		{[]string{draining}},                                                       // a grant without a wait
	} {
		j := newJudge(Rules{})
		for _, s := range tc.steps {
			if s == idle {
				j.lease(watch.Deleted, record("a", completing, "", ""))
			} else {
				j.lease(watch.Modified, record("a", s, "", ""))
			}
		}
		if v := j.Violations(); len(v) != 1 || !strings.Contains(v[0], "which the state machine does not allow") {
			t.Errorf("%v: violations %v", tc.steps, v)
		}
	}
}

func pod(name string, ready, deleting bool) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "db"}}}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	if deleting {
		now := metav1.Now()
		p.DeletionTimestamp = &now
	}
	return p
}

func TestPDBBreachIsAViolation(t *testing.T) {
	j := newJudge(Rules{})
	two := intstr.FromInt32(2)
	j.pdb(watch.Added, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &two, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}})
	j.pod(watch.Added, pod("db-0", false, false))
	j.pod(watch.Added, pod("db-1", true, false))
	if v := j.Violations(); len(v) != 0 {
		t.Fatalf("not yet reached is no breach: %v", v)
	}
	j.pod(watch.Modified, pod("db-0", true, false))
	j.pod(watch.Added, pod("db-2", true, false))
	j.pod(watch.Modified, pod("db-0", true, true)) // evicted: two left
	if v := j.Violations(); len(v) != 0 {
		t.Fatalf("two of minAvailable 2: %v", v)
	}
	j.pod(watch.Deleted, pod("db-1", true, false))
	if v := j.Violations(); len(v) != 1 || !strings.Contains(v[0], "PDB db: 1 pods available, minAvailable 2") {
		t.Fatalf("violations: %v", v)
	}
}

func TestVerdictChecksTheEndState(t *testing.T) {
	ctx := context.Background()
	held := "c"
	client := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{nodeStateLabel: "Completing"}}, Spec: corev1.NodeSpec{Unschedulable: true}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "c"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "d"}, Spec: corev1.NodeSpec{Unschedulable: true}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "e"}, Spec: corev1.NodeSpec{Unschedulable: true}},
		record("d", failed, "", ""),
		record("e", waiting, "", ""),
		&coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lock-default-0", Namespace: "k"}, Spec: coordv1.LeaseSpec{HolderIdentity: &held}},
	)
	j := newJudge(Rules{})
	j.client = client
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		j.asked[n] = true
	}
	err := j.Verdict(ctx, []string{"a", "b", "c", "d", "e"})
	if err == nil {
		t.Fatal("no verdict")
	}
	got := err.Error()
	for _, want := range []string{
		"lock lock-default-0 is held by c, which is Idle (no record)",
		"b is left cordoned without a Failed record saying why (record: Idle)",
		"b is Idle and still labelled kustodian.io/state=Completing",
		"e ended Waiting, not Idle or Failed",
		"e is left cordoned without a Failed record saying why (record: Waiting)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("verdict does not say %q:\n%s", want, got)
		}
	}
	for _, line := range strings.Split(got, "\n") {
		if strings.HasPrefix(line, "a ") || strings.HasPrefix(line, "d ") {
			t.Errorf("a (clean) or d (Failed, says why) blamed: %s", line)
		}
	}
}

func lockLease(name, holder, policy, group, rv string) *coordv1.Lease {
	l := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "k", ResourceVersion: rv, Labels: map[string]string{}, Annotations: map[string]string{}},
		Spec: coordv1.LeaseSpec{HolderIdentity: &holder}}
	if policy != "" {
		l.Labels[labelPolicy] = policy
	}
	if group != "" {
		l.Annotations[annGroup] = group
	}
	return l
}

func nodeWith(name string, cordoned bool, rv string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv, Annotations: map[string]string{}}}
	if cordoned {
		n.Spec.Unschedulable = true
		n.Annotations[nodeCordonedMark] = "true"
	}
	return n
}

func at(l *coordv1.Lease, rv string) *coordv1.Lease {
	l.ResourceVersion = rv
	return l
}

// The replay follows the API server's order, not the order the watches
// delivered: a lock taken before the cordon (by resource version) and
// given back after the uncordon passes whatever order the events came in;
// a cordon outside the lock, or two holders in a one-slot group, do not.
func TestReplayJudgesWhatTheServerStored(t *testing.T) {
	j := newJudge(Rules{Slots: map[string]int{"zones/a": 2}})
	// Delivered out of order: the Node watch ran ahead of the Lease watch.
	j.node(watch.Modified, nodeWith("n1", true, "12"))
	j.node(watch.Modified, nodeWith("n1", false, "14"))
	j.lease(watch.Added, at(record("n1", waiting, "", ""), "10"))
	j.lease(watch.Modified, lockLease("lock-default-0", "n1", "", "", "11"))
	j.lease(watch.Modified, at(record("n1", draining, "", ""), "13"))
	j.lease(watch.Modified, lockLease("lock-default-0", "", "", "", "15"))
	// Two slots in zones/a: two holders are fine.
	j.lease(watch.Added, at(record("z1", waiting, "zones", "a"), "20"))
	j.lease(watch.Added, at(record("z2", waiting, "zones", "a"), "21"))
	j.lease(watch.Modified, lockLease("lock-zones-a-0", "z1", "zones", "a", "22"))
	j.lease(watch.Modified, lockLease("lock-zones-a-1", "z2", "zones", "a", "23"))
	// A Failed node whose lock an admin released keeps its cordon.
	j.lease(watch.Added, at(record("f", failed, "", ""), "30"))
	j.node(watch.Modified, nodeWith("f", true, "31"))
	if v := j.replay(); len(v) != 0 {
		t.Fatalf("a legal run judged: %v", v)
	}

	// n2 is cordoned by Kustodian a version before it takes the lock.
	j.lease(watch.Added, at(record("n2", waiting, "", ""), "40"))
	j.node(watch.Modified, nodeWith("n2", true, "41"))
	j.lease(watch.Modified, lockLease("lock-default-0", "n2", "", "", "42"))
	// n3 takes a third lock of zones/a (concurrency lowered, or a bug).
	j.lease(watch.Added, at(record("n3", waiting, "zones", "a"), "50"))
	j.lease(watch.Modified, lockLease("lock-zones-a-2", "n3", "zones", "a", "51"))
	// A cordon on a node of another test (no record here) is none of its
	// business.
	j.node(watch.Modified, nodeWith("stranger", true, "60"))
	got := strings.Join(j.replay(), "\n")
	for _, want := range []string{
		"n2 carried Kustodian's cordon at resource version 41 without holding a lock (record: Waiting)",
		"3 nodes held locks of group zones/a at resource version 51, 2 slots: [n3 z1 z2]",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the replay does not say %q:\n%s", want, got)
		}
	}
	if lines := strings.Split(got, "\n"); len(lines) != 2 {
		t.Errorf("the replay says %d things, want 2 (each violation once, no innocent node):\n%s", len(lines), got)
	}
}
