package lock

import (
	"crypto/sha256"
	"encoding/hex"
	"reflect"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

func lease(holder string, renewed time.Time) *coordv1.Lease {
	l := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lock-default-0"}}
	l.Spec.HolderIdentity = &holder
	if !renewed.IsZero() {
		m := metav1.NewMicroTime(renewed)
		l.Spec.RenewTime = &m
		l.Spec.AcquireTime = &m
	}
	return l
}

func owned(l *coordv1.Lease, node string) *coordv1.Lease {
	l.OwnerReferences = []metav1.OwnerReference{NodeRef{Name: node, UID: "uid-" + node}.ownerReference()}
	return l
}

func TestDecide(t *testing.T) {
	const stale = 40 * time.Second
	me := &NodeRef{Name: "me", UID: "uid-me"}
	live := &Record{Node: "a", Heartbeat: t0.Add(-10 * time.Second)}
	dead := &Record{Node: "a", Heartbeat: t0.Add(-41 * time.Second)}
	for _, tc := range []struct {
		name   string
		lease  *coordv1.Lease
		facts  HolderFacts
		ttl    time.Duration
		owner  *NodeRef
		free   bool
		reason string
	}{
		{"nobody holds it", lease("", time.Time{}), HolderFacts{}, 0, nil, true, ""},
		{"nil holder", &coordv1.Lease{}, HolderFacts{}, 0, nil, true, ""},
		{"I hold it", lease("me", t0.Add(-time.Hour)), HolderFacts{}, 0, nil, true, "already held"},
		{"held by a live node", lease("a", t0.Add(-time.Hour)), HolderFacts{NodeExists: true, Record: live}, 0, nil, false, "held by a"},
		{"held by a node whose agent is dead, Node still there", lease("a", t0.Add(-time.Hour)), HolderFacts{NodeExists: true, Record: dead}, 0, nil, false, "held by a"},
		{"held by a node that rebooted: no record, Node there", lease("a", t0.Add(-time.Hour)), HolderFacts{NodeExists: true}, 0, nil, false, "held by a"},
		{"Node gone, agent alive", lease("a", t0.Add(-time.Hour)), HolderFacts{Record: live}, 0, nil, false, "agent is alive"},
		{"Node gone, heartbeat stale", lease("a", t0.Add(-time.Hour)), HolderFacts{Record: dead}, 0, nil, true, "no Node object"},
		{"Node gone, no record", lease("a", t0.Add(-time.Hour)), HolderFacts{}, 0, nil, true, "no Node object"},
		{"TTL not expired", lease("a", t0.Add(-time.Minute)), HolderFacts{NodeExists: true, Record: live}, 2 * time.Minute, nil, false, "held by a"},
		{"TTL expired", lease("a", t0.Add(-3*time.Minute)), HolderFacts{NodeExists: true, Record: live}, 2 * time.Minute, nil, true, "TTL"},
		{"no expiry by default, however old", lease("a", t0.Add(-24*time.Hour)), HolderFacts{NodeExists: true}, 0, nil, false, "held by a"},
		// A node-bound agent never takes over: the lock goes with its
		// holder's Node through the garbage collector, or an admin frees it.
		{"bound: Node gone, heartbeat stale, lock owned by it", owned(lease("a", t0.Add(-time.Hour)), "a"), HolderFacts{Record: dead}, 0, me, false, "garbage collector"},
		{"bound: Node gone, lock without owner", lease("a", t0.Add(-time.Hour)), HolderFacts{}, 0, me, false, "kustodian-ctl release a"},
		{"bound: live holder", owned(lease("a", t0.Add(-time.Hour)), "a"), HolderFacts{NodeExists: true, Record: live}, 0, me, false, "held by a"},
		{"bound: free lock", lease("", time.Time{}), HolderFacts{}, 0, me, true, ""},
	} {
		v := Decide(LockOf(tc.lease), "me", tc.facts, t0, Params{StaleAfter: stale, TTL: tc.ttl, Owner: tc.owner})
		if v.Free != tc.free || !strings.Contains(v.Why, tc.reason) {
			t.Errorf("%s: got %+v, want free=%v with %q", tc.name, v, tc.free, tc.reason)
		}
	}
}

func rec(node string, prio int, requested time.Duration, heartbeatAge time.Duration) Record {
	return Record{Node: node, State: Waiting, Policy: "default", Priority: prio,
		Requested: t0.Add(requested), Heartbeat: t0.Add(-heartbeatAge)}
}

func TestQueueOrdersByArrivalNotClocks(t *testing.T) {
	// b's host clock is behind: it claims an earlier request time, but its
	// record reached the API server after a's.
	a := rec("a", 0, 0, 0)
	a.QueueKey = "100"
	b := rec("b", 0, -time.Minute, 0)
	b.QueueKey = "99999" // resource versions compare as numbers, not strings
	c := rec("c", 0, 0, 0)
	c.QueueKey = "1000"
	q := Queue([]Record{b, c, a}, DefaultGroup, t0, time.Minute)
	if got, want := nodes(q), []string{"a", "c", "b"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("queue %v, want %v", got, want)
	}
}

func nodes(q []Record) []string {
	var n []string
	for _, r := range q {
		n = append(n, r.Node)
	}
	return n
}

func TestQueueOrder(t *testing.T) {
	records := []Record{
		rec("c", 0, -1*time.Minute, time.Second),
		rec("a", 0, -2*time.Minute, time.Second),
		rec("b", 0, -2*time.Minute, time.Second),        // same time as a: by name
		rec("urgent", 10, 0, time.Second),               // priority first
		rec("dead", 0, -time.Hour, time.Hour),           // stale heartbeat: out
		rec("future", 99, -time.Hour, -time.Hour),       // heartbeat an hour ahead: out too
		rec("skewed", 0, -time.Minute, -30*time.Second), // a clock 30 s ahead: live
		{Node: "draining", State: Draining, Policy: "default", Heartbeat: t0},
		{Node: "other-group", State: Waiting, Policy: "gpu", Heartbeat: t0},
		{Node: "other-zone", State: Waiting, Policy: "default", Group: "zone-b", Heartbeat: t0},
	}
	q := Queue(records, DefaultGroup, t0, 40*time.Second)
	if got, want := nodes(q), []string{"urgent", "a", "b", "c", "skewed"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("queue %v, want %v", got, want)
	}
}

// A Completing record after a failure is no success; a Failed one has
// failed; a Completing one after a success has not.
func TestFailedBefore(t *testing.T) {
	for _, tc := range []struct {
		r    Record
		want bool
	}{
		{Record{State: Failed}, true},
		{Record{State: Completing, AfterFailure: true}, true},
		{Record{State: Completing}, false},
		{Record{State: InMaintenance, AfterFailure: true}, false},
	} {
		if got := tc.r.FailedBefore(); got != tc.want {
			t.Errorf("%+v: FailedBefore = %v", tc.r, got)
		}
	}
}

func TestRecordRoundTrip(t *testing.T) {
	r := Record{Node: "n1", State: Draining, Since: t0, Reason: "kernel", Message: "draining: 2 pods left",
		RequestID: "abc", Policy: "zones", Group: "eu-1", Priority: 3, Blocked: "outside window", Gates: `[{"gate":"window"}]`, BlockedReported: true, QueueKey: "42", Requested: t0.Add(-time.Minute), Heartbeat: t0,
		AfterFailure: true, ByAdmin: true}
	l := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: RecordName("n1"), Annotations: map[string]string{"other": "kept"}}}
	r.ApplyTo(l)
	if got := RecordFromLease(l); !reflect.DeepEqual(got, r) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, r)
	}
	if l.Annotations["other"] != "kept" || l.Labels[LabelManagedBy] != ManagedBy {
		t.Errorf("annotations/labels: %v %v", l.Annotations, l.Labels)
	}
	r.Reason, r.Priority, r.BlockedReported, r.Gates, r.AfterFailure, r.ByAdmin = "", 0, false, "", false, false
	r.ApplyTo(l)
	for _, k := range []string{AnnotationReason, AnnotationPriority, AnnotationBlockedReported, AnnotationGates, AnnotationAfterFailure, AnnotationByAdmin} {
		if _, ok := l.Annotations[k]; ok {
			t.Errorf("an empty value left annotation %s behind", k)
		}
	}
}

func TestNames(t *testing.T) {
	if RecordName("n") != "node-n" || NodeOfRecord("node-n") != "n" {
		t.Error("record names")
	}
	long := strings.Repeat("a", 60)
	for _, tc := range []struct {
		g    GroupRef
		slot int
		want string
	}{
		{DefaultGroup, 0, "lock-default-0"},
		{GroupRef{Policy: "workers"}, 2, "lock-workers-2"},
		{GroupRef{Policy: "zones", Group: "eu-1"}, 0, "lock-zones-eu-1-0"},
		// A value that is not DNS-safe gets a hash, so that "EU_1" and
		// "eu-1" stay apart.
		{GroupRef{Policy: "zones", Group: "EU_1"}, 0, "lock-zones-eu-1-" + hash6("EU_1") + "-0"},
		{GroupRef{Policy: "zones", Group: "___"}, 1, "lock-zones-" + hash6("___") + "-1"},
		{GroupRef{Policy: "zones", Group: long}, 0, "lock-zones-" + long[:33] + "-" + hash6(long) + "-0"},
	} {
		if got := tc.g.LockName(tc.slot); got != tc.want {
			t.Errorf("%+v slot %d: %s, want %s", tc.g, tc.slot, got, tc.want)
		}
	}
	if got := (GroupRef{Policy: "zones", Group: "eu-1"}).String(); got != "zones/eu-1" {
		t.Errorf("String: %s", got)
	}
	// An old record without a policy is in the default group.
	l := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-x", Annotations: map[string]string{AnnotationGroup: "default"}}}
	if g := RecordFromLease(l).GroupRef(); g != DefaultGroup {
		t.Errorf("old record: group %+v", g)
	}
}

func hash6(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:3])
}

// A lock taken by a node-bound agent is owned by that Node alone (a previous
// holder's Node owner goes); releasing it drops the owner; other owners stay.
func TestLockOwners(t *testing.T) {
	other := metav1.OwnerReference{APIVersion: "example.com/v1", Kind: "Thing", Name: "t", UID: "uid-t"}
	l := owned(lease("a", t0), "a")
	l.OwnerReferences = append(l.OwnerReferences, other)
	me := NodeRef{Name: "me", UID: "uid-me"}
	Take(l, DefaultGroup, "me", t0, Params{Owner: &me})
	if want := []metav1.OwnerReference{other, me.ownerReference()}; !reflect.DeepEqual(l.OwnerReferences, want) {
		t.Errorf("owners after taking: %+v, want %+v", l.OwnerReferences, want)
	}
	if !ownedByNode(l, "me") || ownedByNode(l, "a") {
		t.Errorf("ownedByNode wrong for %+v", l.OwnerReferences)
	}
	Take(l, DefaultGroup, "b", t0, Params{}) // an agent with admin credentials
	if want := []metav1.OwnerReference{other}; !reflect.DeepEqual(l.OwnerReferences, want) {
		t.Errorf("owners after an unbound agent took it: %+v, want %+v", l.OwnerReferences, want)
	}
	if got := withoutNodeOwners([]metav1.OwnerReference{me.ownerReference()}); got != nil {
		t.Errorf("withoutNodeOwners kept %+v", got)
	}
}

func TestClip(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"short", 10, "short"},
		{"abcdefghij", 10, "abcdefghij"},
		{"abcdefghijk", 10, "abcdefg…"},
		{"ééééé", 8, "éé…"}, // not inside a character
	} {
		if got := Clip(tc.in, tc.n); got != tc.want || len(got) > tc.n {
			t.Errorf("Clip(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
	var many []string
	for i := 0; i < 100; i++ {
		many = append(many, "Deployment/ns/"+strings.Repeat("x", 400))
	}
	if got := FormatDisrupted(many); len(got) > MaxDisruptedBytes || len(ParseDisrupted(got)) == 0 {
		t.Errorf("FormatDisrupted: %d bytes, %d entries", len(got), len(ParseDisrupted(got)))
	}
}
