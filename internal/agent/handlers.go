package agent

import (
	"maps"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kustodian/kustodian/internal/lock"
)

// watchHandlers are what the agent does with the changes its watches
// deliver.
type watchHandlers struct {
	groupLeases, ownRecord, nodeLabels, rollouts, other cache.ResourceEventHandler
}

func (a *Agent) handlers() watchHandlers {
	poke := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { a.poke() },
		UpdateFunc: func(any, any) { a.poke() },
		DeleteFunc: func(any) { a.poke() },
	}
	return watchHandlers{
		// What an agent watches does not grow with the fleet
		// (docs/agent.md): the lock and queue Leases (labelled with their
		// policy) and its own record, never the other agents' records and
		// heartbeats.
		groupLeases: cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) { a.sawQueue(nil, obj); a.poke() },
			UpdateFunc: func(oldObj, obj any) {
				a.sawQueue(oldObj, obj)
				a.poke()
			},
			DeleteFunc: func(obj any) { a.sawDeleted(obj); a.sawQueueDeleted(obj); a.poke() },
		},
		// Its own record's echo after a heartbeat changes no decision.
		ownRecord: cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { a.poke() },
			UpdateFunc: func(oldObj, newObj any) {
				o, ok1 := oldObj.(*coordv1.Lease)
				n, ok2 := newObj.(*coordv1.Lease)
				if ok1 && ok2 && heartbeatOnly(o, n) {
					return
				}
				a.poke()
			},
			DeleteFunc: func(obj any) { a.sawDeleted(obj); a.poke() },
		},
		// The Nodes' metadata changes with every status update; only
		// their labels (and the Nodes that come and go) matter to
		// rollouts, and not the state label every agent changes at each
		// step of a maintenance: with it, every node's maintenance would
		// wake every agent several times.
		nodeLabels: cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { a.poke() },
			UpdateFunc: func(oldObj, newObj any) {
				o, ok1 := oldObj.(*metav1.PartialObjectMetadata)
				n, ok2 := newObj.(*metav1.PartialObjectMetadata)
				if ok1 && ok2 && sameLabelsBut(o.Labels, n.Labels, lock.LabelState) {
					return
				}
				a.poke()
			},
			DeleteFunc: func(any) { a.poke() },
		},
		// The rollouts' metadata: a step when one comes or goes, its
		// spec changes, or its status does while this agent follows it
		// (rolloutread.go).
		rollouts: cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { a.poke() },
			UpdateFunc: func(oldObj, newObj any) {
				if a.rollouts.rolloutChanged(oldObj, newObj) {
					a.poke()
				}
			},
			DeleteFunc: func(any) { a.poke() },
		},
		other: poke,
	}
}

// sawDeleted tells the lease view of a deletion: an own write of that
// Lease no longer stands.
func (a *Agent) sawDeleted(obj any) {
	if a.locks.view != nil {
		a.locks.view.SawDeleted(obj)
	}
}

// heartbeatOnly reports whether a record update changed nothing but its
// renewTime.
func heartbeatOnly(o, n *coordv1.Lease) bool {
	if len(o.Annotations) != len(n.Annotations) {
		return false
	}
	for k, v := range o.Annotations {
		if n.Annotations[k] != v {
			return false
		}
	}
	return lock.Holder(o) == lock.Holder(n) && o.Spec.AcquireTime.Equal(n.Spec.AcquireTime)
}

// sawQueue notes when a queue Lease changed, and when its summary did (a
// renewal or a claim leaves it as it was): a summary that does not change
// for long tells the nodes behind its head that the head is gone. A
// version already seen (an informer's relist, a watch started again after
// a sleep far back) is no change.
func (a *Agent) sawQueue(_, obj any) {
	l, ok := obj.(*coordv1.Lease)
	if !ok || !lock.IsQueueName(l.Name) {
		return
	}
	now := a.now()
	a.queue.mu.Lock()
	defer a.queue.mu.Unlock()
	last, known := a.queue.last[l.Name]
	summary := l.Annotations[lock.AnnotationQueue]
	if known && last.rv == l.ResourceVersion && l.ResourceVersion != "" {
		return
	}
	a.queue.seen[l.Name] = now
	if !known || last.summary != summary {
		a.queue.changed[l.Name] = now
	}
	a.queue.last[l.Name] = seenQueue{rv: l.ResourceVersion, summary: summary}
}

// sawQueueDeleted forgets a queue Lease that is gone.
func (a *Agent) sawQueueDeleted(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if l, ok := obj.(*coordv1.Lease); ok {
		a.queue.mu.Lock()
		delete(a.queue.last, l.Name)
		delete(a.queue.parsed, l.Name)
		a.queue.mu.Unlock()
	}
}

// sameLabelsBut reports whether two sets of labels are the same but for
// the label but.
func sameLabelsBut(a, b map[string]string, but string) bool {
	if _, ok := a[but]; ok {
		a = maps.Clone(a)
		delete(a, but)
	}
	if _, ok := b[but]; ok {
		b = maps.Clone(b)
		delete(b, but)
	}
	return maps.Equal(a, b)
}
