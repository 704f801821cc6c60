package lockapi

import (
	"context"
	"reflect"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kustodian/kustodian/internal/lock"
)

// An admin's release marks the holder's record lock.Failed for its request,
// frees its lock, and then the group no longer counts as stuck behind
// it; a node that holds nothing is left alone.
func TestReleaseByAdmin(t *testing.T) {
	ctx := context.Background()
	c := &Client{Kube: fake.NewClientset(), Namespace: "kustodian"}
	params := lock.Params{StaleAfter: time.Minute}
	for _, n := range []string{"n1", "n2"} {
		state := lock.Failed
		if n == "n2" {
			state = lock.Waiting
		}
		if _, err := c.PutRecord(ctx, nil, lock.Record{Node: n, State: state, RequestID: "req-" + n, Group: lock.DefaultGroup.Group, Policy: lock.DefaultGroup.Policy,
			Message: "job apt (run 1): failed, exit 100", Heartbeat: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	name := lock.DefaultGroup.LockName(0)
	if l, _, err := c.Acquire(ctx, name, lock.DefaultGroup, "n1", nil, params, nil); err != nil || l == nil {
		t.Fatalf("n1 takes %s: %v", name, err)
	}
	stuck, err := c.FailedHolders(ctx, "n2")
	if err != nil || len(stuck) != 1 || stuck[0] != (FailedHolder{Lock: name, Node: "n1", Message: "job apt (run 1): failed, exit 100"}) {
		t.Errorf("n2 behind a Failed n1: %+v %v", stuck, err)
	}

	if got, err := c.ReleaseByAdmin(ctx, "n2", "test", time.Minute); err != nil || len(got) != 0 {
		t.Errorf("releasing n2, which holds nothing: %v %v", got, err)
	}
	if r, _ := c.GetRecord(ctx, "n2"); r.State != lock.Waiting || r.ReleasedRequest != "" {
		t.Errorf("n2's record was touched: %+v", r)
	}

	got, err := c.ReleaseByAdmin(ctx, "n1", "test", time.Minute)
	if err != nil || len(got) != 1 || got[0] != name {
		t.Fatalf("releasing n1: %v %v", got, err)
	}
	r, err := c.GetRecord(ctx, "n1")
	if err != nil || r.State != lock.Failed || r.ReleasedRequest != "req-n1" || r.Message != lock.ReleasedByAdmin {
		t.Errorf("n1's record after the release: %+v %v", r, err)
	}
	l, err := c.Kube.CoordinationV1().Leases("kustodian").Get(ctx, name, metav1.GetOptions{})
	if err != nil || lock.Holder(l) != "" {
		t.Errorf("%s after the release: holder %q %v", name, lock.Holder(l), err)
	}
	if stuck, err := c.FailedHolders(ctx, "n2"); err != nil || stuck != nil {
		t.Errorf("n2 with the lock free: %+v %v", stuck, err)
	}
}

// Pausing writes the control ConfigMap (made when missing) that lock.Paused
// reads; a hold is the Node's annotation, set and cleared.
func TestPauseAndHold(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	c := &Client{Kube: client, Namespace: "kustodian"}
	for _, tc := range []struct {
		paused bool
		reason string
	}{{true, "incident 42"}, {false, ""}, {true, ""}} {
		if err := c.SetPaused(ctx, tc.paused, tc.reason); err != nil {
			t.Fatal(err)
		}
		cm, err := client.CoreV1().ConfigMaps("kustodian").Get(ctx, lock.ControlConfigMap, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if paused, reason := lock.Paused(cm); paused != tc.paused || reason != tc.reason || cm.Labels[lock.LabelManagedBy] != lock.ManagedBy {
			t.Errorf("after SetPaused(%v, %q): %v %q %v", tc.paused, tc.reason, paused, reason, cm.Labels)
		}
	}
	hold := func() (string, bool) {
		n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, ok := n.Annotations[lock.AnnotationHold]
		return v, ok
	}
	if err := c.SetHold(ctx, "n1", true, "backup"); err != nil {
		t.Fatal(err)
	}
	if v, ok := hold(); !ok || v != "backup" {
		t.Errorf("hold %q %v", v, ok)
	}
	if err := c.SetHold(ctx, "n1", false, ""); err != nil {
		t.Fatal(err)
	}
	if v, ok := hold(); ok {
		t.Errorf("hold %q left", v)
	}
	if err := c.SetHold(ctx, "n9", true, ""); err == nil {
		t.Error("a hold on a node that does not exist")
	}
}

// A node hands off: each group whose lock it holds gets a summary naming
// its next node before any of its locks goes free, the locks of others
// stay held, and the queues that name a node without a request are made
// again without it.
func TestHandOffNamesTheNextBeforeFreeing(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset()
	c := &Client{Kube: kube, Namespace: "kustodian"}
	a := lock.GroupRef{Policy: "p", Group: "zone-a"}
	b := lock.GroupRef{Policy: "p", Group: "zone-b"}
	for _, r := range []lock.Record{
		{Node: "me", State: lock.InMaintenance, Policy: "p", Group: "zone-a"},
		{Node: "next-a", State: lock.Waiting, Policy: "p", Group: "zone-a"},
		{Node: "next-b", State: lock.Waiting, Policy: "p", Group: "zone-b"},
	} {
		r.Heartbeat = time.Now()
		if _, err := c.PutRecord(ctx, nil, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, take := range []struct {
		g    lock.GroupRef
		slot int
		node string
	}{{a, 0, "me"}, {b, 1, "me"}, {b, 0, "other"}} {
		if l, _, err := c.Acquire(ctx, take.g.LockName(take.slot), take.g, take.node, nil, lock.Params{}, nil); err != nil || l == nil {
			t.Fatalf("%s takes %s: %v", take.node, take.g.LockName(take.slot), err)
		}
	}
	locks, err := c.Locks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var leases []*coordv1.Lease
	for i := range locks {
		leases = append(leases, &locks[i])
	}
	kube.ClearActions()
	written, err := c.HandOff(ctx, "me", "me", leases, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(written) != 4 {
		t.Errorf("HandOff wrote %d Leases, want 2 summaries and 2 locks", len(written))
	}
	var order []string
	for _, act := range kube.Actions() {
		if w, ok := act.(interface{ GetObject() runtime.Object }); ok && (act.GetVerb() == "create" || act.GetVerb() == "update") {
			order = append(order, w.GetObject().(*coordv1.Lease).Name)
		}
	}
	want := []string{a.QueueName(), b.QueueName(), a.LockName(0), b.LockName(1)}
	if !reflect.DeepEqual(order, want) {
		t.Errorf("written in the order %v, want %v", order, want)
	}
	for name, holder := range map[string]string{a.LockName(0): "", b.LockName(1): "", b.LockName(0): "other"} {
		l, err := kube.CoordinationV1().Leases("kustodian").Get(ctx, name, metav1.GetOptions{})
		if err != nil || lock.Holder(l) != holder {
			t.Errorf("%s after the hand-off: holder %q (%v), want %q", name, lock.Holder(l), err, holder)
		}
	}
	q, err := kube.CoordinationV1().Leases("kustodian").Get(ctx, a.QueueName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := lock.SummaryFromLease(q)
	if err != nil || s.Index("next-a") != 0 {
		t.Errorf("zone-a's queue after the hand-off: %+v %v, want next-a first", s, err)
	}

	// next-a no longer has a request: it leaves the queue that names it.
	if err := c.DeleteRecord(ctx, "next-a"); err != nil {
		t.Fatal(err)
	}
	written, err = c.LeaveQueues(ctx, "next-a", []*coordv1.Lease{q}, time.Minute)
	if err != nil || len(written) != 1 {
		t.Fatalf("LeaveQueues: %d written, %v", len(written), err)
	}
	if s, err := lock.SummaryFromLease(written[0]); err != nil || s.Index("next-a") >= 0 {
		t.Errorf("zone-a's queue after next-a left: %+v %v", s, err)
	}
}
