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

// A Lease this agent wrote and someone else then deleted (an admin, or the
// garbage collector with its Node) is gone for the view too, once the
// watch delivers the deletion; a deletion of an older version is not.
func TestLeaseViewOwnWriteDeletedBySomeoneElse(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	v := newLeaseView("ns", store)
	v.Wrote(leaseAt("node-me", "me", "7"))
	// The deletion of the version before this agent's write changes
	// nothing: the write is newer.
	v.SawDeleted(leaseAt("node-me", "me", "6"))
	if v.Get("node-me") == nil {
		t.Fatal("an own write hidden by the deletion of an older version")
	}
	_ = store.Add(leaseAt("node-me", "me", "7"))
	v.Wrote(leaseAt("node-me", "me", "8"))
	_ = store.Delete(leaseAt("node-me", "me", "8"))
	v.SawDeleted(cache.DeletedFinalStateUnknown{Key: "ns/node-me", Obj: leaseAt("node-me", "me", "8")})
	if l := v.Get("node-me"); l != nil {
		t.Fatalf("the view still shows version %s of a Lease deleted after it", l.ResourceVersion)
	}
	if n := len(v.List()); n != 0 {
		t.Fatalf("List shows %d leases", n)
	}
	// Written again: shown again.
	v.Wrote(leaseAt("node-me", "me", "12"))
	if v.Get("node-me") == nil {
		t.Fatal("a Lease written again after its deletion is hidden")
	}
}
