package agent

import (
	"context"

	coordv1 "k8s.io/api/coordination/v1"

	"github.com/kustodian/kustodian/internal/lock"
)

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
