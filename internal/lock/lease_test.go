package lock

import (
	"reflect"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func lockOf(name string, g GroupRef, holder string) *coordv1.Lease {
	l := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}
	Take(l, g, holder, t0, Params{})
	return l
}

// The hand-off names the groups of the node's own locks, each once, in
// the order of the lock names whatever the order they were listed in;
// locks of others, records and queues do not count.
func TestHandOffGroupsAndHeldBy(t *testing.T) {
	a := GroupRef{Policy: "p", Group: "zone-a"}
	b := GroupRef{Policy: "p", Group: "zone-b"}
	record := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: RecordName("me")}}
	holder := "me"
	record.Spec.HolderIdentity = &holder
	leases := []*coordv1.Lease{
		lockOf(b.LockName(1), b, "me"),
		lockOf(a.LockName(0), a, "other"),
		nil,
		record,
		lockOf(b.LockName(0), b, "me"),
		lockOf(a.LockName(1), a, "me"),
	}
	if got, want := HandOffGroups(leases, "me"), []GroupRef{a, b}; !reflect.DeepEqual(got, want) {
		t.Errorf("HandOffGroups = %v, want %v", got, want)
	}
	if got, want := HeldBy(leases, "me"), []string{a.LockName(1), b.LockName(0), b.LockName(1)}; !reflect.DeepEqual(got, want) {
		t.Errorf("HeldBy = %v, want %v", got, want)
	}
	if got := HandOffGroups(leases, "nobody"); got != nil {
		t.Errorf("HandOffGroups of a node that holds nothing = %v", got)
	}
}

func queueLease(t *testing.T, g GroupRef, s Summary) *coordv1.Lease {
	t.Helper()
	l := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: g.QueueName()}}
	if ok, err := StoreSummary(l, g, s, "writer", t0); err != nil || !ok {
		t.Fatalf("StoreSummary into an empty Lease: %v %v", ok, err)
	}
	return l
}

// A summary made from an older LIST never replaces a newer one; one made
// from the same or a newer LIST does, and says who wrote it.
func TestStoreSummaryKeepsTheNewer(t *testing.T) {
	l := queueLease(t, DefaultGroup, Summary{Nodes: []string{"a"}, Total: 1, ListRV: "200"})
	if ok, err := StoreSummary(l, DefaultGroup, Summary{Nodes: []string{"b"}, Total: 1, ListRV: "99"}, "late", t0.Add(time.Second)); err != nil || ok {
		t.Fatalf("an older summary was stored: %v %v", ok, err)
	}
	if s, err := SummaryFromLease(l); err != nil || s.Nodes[0] != "a" || s.By != "writer" {
		t.Fatalf("after an older summary: %+v %v", s, err)
	}
	if ok, err := StoreSummary(l, DefaultGroup, Summary{Nodes: []string{"c"}, Total: 1, ListRV: "1000"}, "next", t0.Add(time.Second)); err != nil || !ok {
		t.Fatalf("a newer summary was refused: %v %v", ok, err)
	}
	if s, err := SummaryFromLease(l); err != nil || s.Nodes[0] != "c" || s.By != "next" || !l.Spec.RenewTime.Time.Equal(t0.Add(time.Second)) {
		t.Fatalf("after a newer summary: %+v %v renewed %v", s, err, l.Spec.RenewTime)
	}
}

// A node without a request leaves the queues that still name it, and only
// those.
func TestQueuesNaming(t *testing.T) {
	a := GroupRef{Policy: "p", Group: "zone-a"}
	b := GroupRef{Policy: "p", Group: "zone-b"}
	broken := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: GroupRef{Policy: "q"}.QueueName(),
		Labels: map[string]string{LabelPolicy: "q"}, Annotations: map[string]string{AnnotationQueue: "{"}}}
	leases := []*coordv1.Lease{
		queueLease(t, b, Summary{Nodes: []string{"x", "me"}, Total: 2, ListRV: "1"}),
		queueLease(t, a, Summary{Nodes: []string{"x"}, Total: 5, ListRV: "1"}),
		broken,
		lockOf(a.LockName(0), a, "me"),
	}
	if got, want := QueuesNaming(leases, "me"), []GroupRef{b}; !reflect.DeepEqual(got, want) {
		t.Errorf("QueuesNaming = %v, want %v", got, want)
	}
}

// An admin's release marks the current request, or every request when the
// record names none.
func TestReleasedAt(t *testing.T) {
	r := ReleasedAt(Record{Node: "n", State: InMaintenance, RequestID: "req-1"}, t0.Add(1500*time.Millisecond))
	if r.State != Failed || r.ReleasedRequest != "req-1" || r.Message != ReleasedByAdmin || !r.ByAdmin || !r.Since.Equal(t0.Add(time.Second)) {
		t.Errorf("ReleasedAt = %+v", r)
	}
	if r := ReleasedAt(Record{Node: "n", State: Draining}, t0); r.ReleasedRequest != "*" {
		t.Errorf("ReleasedAt without a request marks %q, want *", r.ReleasedRequest)
	}
}
