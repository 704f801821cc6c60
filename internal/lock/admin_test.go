package lock

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// An admin's release marks the holder's record Failed for its request,
// frees its lock, and then the group no longer counts as stuck behind
// it; a node that holds nothing is left alone.
func TestReleaseByAdmin(t *testing.T) {
	ctx := context.Background()
	c := &Client{Kube: fake.NewClientset(), Namespace: "kustodian"}
	params := Params{StaleAfter: time.Minute}
	for _, n := range []string{"n1", "n2"} {
		state := Failed
		if n == "n2" {
			state = Waiting
		}
		if _, err := c.PutRecord(ctx, nil, Record{Node: n, State: state, RequestID: "req-" + n, Group: DefaultGroup.Group, Policy: DefaultGroup.Policy,
			Message: "job apt (run 1): failed, exit 100", Heartbeat: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	name := DefaultGroup.LockName(0)
	if l, _, err := c.Acquire(ctx, name, DefaultGroup, "n1", nil, params, nil); err != nil || l == nil {
		t.Fatalf("n1 takes %s: %v", name, err)
	}
	stuck, err := c.FailedHolders(ctx, "n2")
	if err != nil || len(stuck) != 1 || stuck[0] != (FailedHolder{Lock: name, Node: "n1", Message: "job apt (run 1): failed, exit 100"}) {
		t.Errorf("n2 behind a Failed n1: %+v %v", stuck, err)
	}

	if got, err := c.ReleaseByAdmin(ctx, "n2", "test", time.Minute); err != nil || len(got) != 0 {
		t.Errorf("releasing n2, which holds nothing: %v %v", got, err)
	}
	if r, _ := c.GetRecord(ctx, "n2"); r.State != Waiting || r.ReleasedRequest != "" {
		t.Errorf("n2's record was touched: %+v", r)
	}

	got, err := c.ReleaseByAdmin(ctx, "n1", "test", time.Minute)
	if err != nil || len(got) != 1 || got[0] != name {
		t.Fatalf("releasing n1: %v %v", got, err)
	}
	r, err := c.GetRecord(ctx, "n1")
	if err != nil || r.State != Failed || r.ReleasedRequest != "req-n1" || r.Message != ReleasedByAdmin {
		t.Errorf("n1's record after the release: %+v %v", r, err)
	}
	l, err := c.Kube.CoordinationV1().Leases("kustodian").Get(ctx, name, metav1.GetOptions{})
	if err != nil || Holder(l) != "" {
		t.Errorf("%s after the release: holder %q %v", name, Holder(l), err)
	}
	if stuck, err := c.FailedHolders(ctx, "n2"); err != nil || stuck != nil {
		t.Errorf("n2 with the lock free: %+v %v", stuck, err)
	}
}

// Pausing writes the control ConfigMap (made when missing) that Paused
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
		cm, err := client.CoreV1().ConfigMaps("kustodian").Get(ctx, ControlConfigMap, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if paused, reason := Paused(cm); paused != tc.paused || reason != tc.reason || cm.Labels[LabelManagedBy] != ManagedBy {
			t.Errorf("after SetPaused(%v, %q): %v %q %v", tc.paused, tc.reason, paused, reason, cm.Labels)
		}
	}
	hold := func() (string, bool) {
		n, err := client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		v, ok := n.Annotations[AnnotationHold]
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
