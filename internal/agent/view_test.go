package agent

import (
	"testing"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kustodian/kustodian/internal/lock"
)

func leaseAt(name, holder, rv string) *coordv1.Lease {
	l := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", ResourceVersion: rv}}
	l.Spec.HolderIdentity = &holder
	return l
}

func TestLeaseViewOverlaysOwnWrites(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	v := newLeaseView("ns", store)
	_ = store.Add(leaseAt("lock-default-0", "", "10"))

	// Just taken: the cache still says free, the view says mine.
	v.Wrote(leaseAt("lock-default-0", "me", "12"))
	if h := lock.Holder(v.Get("lock-default-0")); h != "me" {
		t.Fatalf("holder %q right after the write, want me", h)
	}
	// The cache delivers an older version: still mine.
	_ = store.Update(leaseAt("lock-default-0", "", "11"))
	if h := lock.Holder(v.Get("lock-default-0")); h != "me" {
		t.Fatalf("holder %q with the cache behind, want me", h)
	}
	// The cache catches up, then someone else writes: the cache wins.
	_ = store.Update(leaseAt("lock-default-0", "me", "12"))
	if h := lock.Holder(v.Get("lock-default-0")); h != "me" {
		t.Fatalf("holder %q", h)
	}
	_ = store.Update(leaseAt("lock-default-0", "", "20"))
	if h := lock.Holder(v.Get("lock-default-0")); h != "" {
		t.Fatalf("holder %q after an admin released it, want none", h)
	}
}

func TestLeaseViewTombstones(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	v := newLeaseView("ns", store)
	_ = store.Add(leaseAt("node-me", "me", "5"))
	v.Deleted("node-me", "5")
	if v.Get("node-me") != nil {
		t.Fatal("a deleted record still shows while the cache lags")
	}
	if n := len(v.List()); n != 0 {
		t.Fatalf("List shows %d leases", n)
	}
	// Re-created by someone after the deletion: shown.
	_ = store.Update(leaseAt("node-me", "me", "9"))
	if v.Get("node-me") == nil {
		t.Fatal("a record created again after the deletion is hidden")
	}
	// A write not yet in the cache is listed.
	v.Wrote(leaseAt("node-new", "new", "30"))
	if n := len(v.List()); n != 2 {
		t.Fatalf("List shows %d leases, want 2", n)
	}
}
