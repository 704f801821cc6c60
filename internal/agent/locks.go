package agent

import (
	"context"

	coordv1 "k8s.io/api/coordination/v1"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/lock/lockapi"
)

// The agent's doors to the lock protocol's objects: its locks and the
// queues' summaries (lockSide), and the nodes' records (recordSide). Each
// keeps what it writes in the agent's view of the Leases (leaseView)
// itself, so that the next decision sees the write before the cache does.

// acquire tries to take lock name for this node.
func (l *lockSide) acquire(ctx context.Context, name string, group lock.GroupRef, p lock.Params, facts lockapi.FactsFunc) (bool, lock.Verdict, error) {
	taken, v, err := l.store.Acquire(ctx, name, group, l.node, l.view.Get(name), p, facts)
	if err != nil || taken == nil {
		return false, v, err
	}
	l.view.Wrote(taken)
	return true, v, nil
}

// release gives lock name back.
func (l *lockSide) release(ctx context.Context, name string) error {
	released, err := l.store.Release(ctx, name, l.node)
	if err != nil {
		return err
	}
	l.view.Wrote(released)
	return nil
}

// renew renews lock name, held with a TTL.
func (l *lockSide) renew(ctx context.Context, name string) error {
	renewed, err := l.store.Renew(ctx, name, l.node)
	if err != nil {
		return err
	}
	l.view.Wrote(renewed)
	return nil
}

// handOff releases every lock this node holds, naming the next nodes of
// their queues first.
func (l *lockSide) handOff(ctx context.Context) error {
	written, err := l.store.HandOff(ctx, l.node, l.node, l.view.List(), l.staleAfter)
	for _, w := range written {
		l.view.Wrote(w)
	}
	return err
}

// leaveQueues makes again the summaries that still name this node.
func (l *lockSide) leaveQueues(ctx context.Context) error {
	written, err := l.store.LeaveQueues(ctx, l.node, l.view.List(), l.staleAfter)
	for _, w := range written {
		l.view.Wrote(w)
	}
	return err
}

// setDisrupted writes on lock name the controllers its drain disrupted.
func (l *lockSide) setDisrupted(ctx context.Context, name string, controllers []string) error {
	written, err := l.store.SetDisrupted(ctx, name, l.node, controllers)
	if err != nil {
		return err
	}
	l.view.Wrote(written)
	return nil
}

// holds asks the API server whether this node holds lock name.
func (l *lockSide) holds(ctx context.Context, name string) (bool, error) {
	return l.store.Holds(ctx, name, l.node)
}

// all reads the namespace's locks afresh.
func (l *lockSide) all(ctx context.Context) ([]*coordv1.Lease, error) {
	locks, err := l.store.Locks(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*coordv1.Lease, len(locks))
	for i := range locks {
		out[i] = &locks[i]
	}
	return out, nil
}

// summarize makes this node's own view of group's queue (one LIST).
func (l *lockSide) summarize(ctx context.Context, group lock.GroupRef) (lock.Summary, error) {
	return l.store.Summarize(ctx, group, l.node, l.staleAfter)
}

// renominate makes group's summary from one LIST and writes it.
func (l *lockSide) renominate(ctx context.Context, group lock.GroupRef) (lock.Summary, error) {
	mine, written, err := l.store.Renominate(ctx, group, l.node, l.staleAfter)
	if err != nil {
		return mine, err
	}
	l.view.Wrote(written)
	return mine, nil
}

// touch renews group's summary, which this node heads.
func (l *lockSide) touch(ctx context.Context, group lock.GroupRef) error {
	current := l.view.Get(group.QueueName())
	if current == nil {
		return nil
	}
	written, err := l.store.TouchSummary(ctx, current, l.node)
	if err != nil {
		return err
	}
	l.view.Wrote(written)
	return nil
}

// recordSide is the nodes' records: this node's, which it writes, and
// another's, which it reads when that node holds a lock.
type recordSide struct {
	store recordStore
	view  *leaseView
	node  string
}

// mine is this node's record Lease as last known, or nil.
func (r *recordSide) mine() *coordv1.Lease { return r.view.Get(lock.RecordName(r.node)) }

// get reads another node's record from the API server.
func (r *recordSide) get(ctx context.Context, node string) (*lock.Record, error) {
	return r.store.GetRecord(ctx, node)
}

// put writes this node's record over base (its Lease as last known; nil
// for none).
func (r *recordSide) put(ctx context.Context, base *coordv1.Lease, rec lock.Record) error {
	written, err := r.store.PutRecord(ctx, base, rec)
	if err != nil {
		return err
	}
	r.view.Wrote(written)
	return nil
}

// remove deletes this node's record, when it has one.
func (r *recordSide) remove(ctx context.Context) error {
	l := r.mine()
	if l == nil {
		return nil
	}
	if err := r.store.DeleteRecord(ctx, r.node); err != nil {
		return err
	}
	r.view.Deleted(l.Name, l.ResourceVersion)
	return nil
}
