package agent

import (
	"sync"

	"github.com/kustodian/kustodian/internal/lock"
	coordv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/tools/cache"
)

// leaseView reads the Leases the agent watches (the lock and queue Leases,
// and its own record) from the informers' caches, overlaid with what this
// agent itself wrote: right after a write the cache may still hold the
// version before it, and deciding on that would undo the write (a lock just
// taken would look free again). An own write counts until the cache holds
// the same or a newer resourceVersion, or until the watch delivers the
// Lease's deletion at or after that version (someone else deleted it: an
// admin, or the garbage collector with the Node that owned it).
type leaseView struct {
	stores    []leaseSource
	namespace string

	mu   sync.Mutex
	mine map[string]ownWrite
	// gone: the last version of each Lease whose deletion the watches
	// delivered, while an own write of it is kept.
	gone map[string]string
}

type ownWrite struct {
	lease   *coordv1.Lease
	deleted bool
	rv      string // the version written, or the last version before the deletion
}

// leaseSource is a store the view reads.
type leaseSource interface {
	GetByKey(key string) (any, bool, error)
	List() []any
}

func newLeaseView(namespace string, stores ...leaseSource) *leaseView {
	return &leaseView{stores: stores, namespace: namespace, mine: map[string]ownWrite{}, gone: map[string]string{}}
}

func (v *leaseView) cached(name string) *coordv1.Lease {
	for _, st := range v.stores {
		obj, ok, err := st.GetByKey(v.namespace + "/" + name)
		if err != nil || !ok {
			continue
		}
		l, _ := obj.(*coordv1.Lease)
		return l
	}
	return nil
}

// Get returns the newest known version of the Lease, or nil.
func (v *leaseView) Get(name string) *coordv1.Lease {
	c := v.cached(name)
	v.mu.Lock()
	defer v.mu.Unlock()
	w, ok := v.mine[name]
	if !ok {
		return c
	}
	if w.deleted {
		if c == nil {
			delete(v.mine, name) // the cache caught up
			return nil
		}
		if compare(c.ResourceVersion, w.rv) > 0 {
			delete(v.mine, name) // re-created since
			return c
		}
		return nil
	}
	if c != nil && compare(c.ResourceVersion, w.rv) >= 0 {
		delete(v.mine, name) // the cache caught up, or someone wrote after us
		return c
	}
	if last, ok := v.gone[name]; ok && c == nil && compare(last, w.rv) >= 0 {
		// Deleted by someone else after this agent's write: kept, the
		// write would stand for a Lease that no longer exists, for ever.
		delete(v.mine, name)
		delete(v.gone, name)
		return nil
	}
	return w.lease
}

// SawDeleted records a deletion the watches delivered: obj is the Lease as
// last seen (or cache.DeletedFinalStateUnknown).
func (v *leaseView) SawDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	l, ok := obj.(*coordv1.Lease)
	if !ok {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if w, ok := v.mine[l.Name]; ok && !w.deleted {
		v.gone[l.Name] = l.ResourceVersion
	}
}

// compare orders resource versions; versions it cannot compare count as
// newer, so that the cache wins.
func compare(a, b string) int {
	cmp, ok := lock.VersionOrder(a, b)
	if !ok {
		return 1
	}
	return cmp
}

// Wrote records a Lease this agent has just written.
func (v *leaseView) Wrote(l *coordv1.Lease) {
	if l == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.mine[l.Name] = ownWrite{lease: l.DeepCopy(), rv: l.ResourceVersion}
	delete(v.gone, l.Name)
}

// Deleted records that this agent has just deleted the Lease whose last
// known version was lastRV.
func (v *leaseView) Deleted(name, lastRV string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.mine[name] = ownWrite{deleted: true, rv: lastRV}
}

// List returns every Lease watched, overlaid with own writes.
func (v *leaseView) List() []*coordv1.Lease {
	seen := map[string]bool{}
	var out []*coordv1.Lease
	for _, st := range v.stores {
		for _, obj := range st.List() {
			l, ok := obj.(*coordv1.Lease)
			if !ok || seen[l.Name] {
				continue
			}
			seen[l.Name] = true
			if got := v.Get(l.Name); got != nil {
				out = append(out, got)
			}
		}
	}
	v.mu.Lock()
	var extra []string
	for name := range v.mine {
		if !seen[name] {
			extra = append(extra, name)
		}
	}
	v.mu.Unlock()
	for _, name := range extra {
		if got := v.Get(name); got != nil {
			out = append(out, got)
		}
	}
	return out
}
