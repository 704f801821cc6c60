package lockapi

import (
	"context"
	"fmt"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/kustodian/kustodian/internal/lock"
)

// ReleaseByAdmin breaks the locks node holds, for an admin whose node's
// maintenance failed: it marks the node's record lock.Failed for its current
// request first (its agent will not take a lock again for it), names the
// next nodes of each group the locks belong to (as an agent giving its
// lock back does), then frees each lock. by names the admin's tool in the
// queue summaries. It returns the names of the locks freed; none when
// node holds none (and then it changes nothing).
func (c *Client) ReleaseByAdmin(ctx context.Context, node, by string, staleAfter time.Duration) ([]string, error) {
	locks, err := c.Locks(ctx)
	if err != nil {
		return nil, err
	}
	leases := make([]*coordv1.Lease, len(locks))
	for i := range locks {
		leases[i] = &locks[i]
	}
	held := lock.HeldBy(leases, node)
	if len(held) == 0 {
		return nil, nil
	}
	// The mark first: an agent that saw its lock go before the mark would
	// queue again at once, and it is first in line.
	if err := c.markReleased(ctx, node); err != nil {
		return nil, err
	}
	// The node released is not Waiting, so the summaries made now leave it
	// out.
	if _, err := c.HandOff(ctx, node, by, leases, staleAfter); err != nil {
		return nil, err
	}
	return held, nil
}

// HandOff gives back the locks node holds among leases (as last read): it
// names the next nodes of each of their groups first (Renominate), so that
// their handoff is one watch event and one update, then frees each lock. A crash
// in between names them again at the next start. by names the writer of
// the summaries. It returns the Leases as written.
func (c *Client) HandOff(ctx context.Context, node, by string, leases []*coordv1.Lease, staleAfter time.Duration) ([]*coordv1.Lease, error) {
	var written []*coordv1.Lease
	held := lock.HeldBy(leases, node)
	for _, g := range lock.HandOffGroups(leases, node) {
		_, l, err := c.Renominate(ctx, g, by, staleAfter)
		if lock.IsFormatError(err) {
			// A summary of newer agents' (its Lease or a record of its
			// group in a newer format) is theirs to make; it is advice,
			// and the lock goes back all the same.
			continue
		}
		if err != nil {
			return written, err
		}
		written = append(written, l)
	}
	for _, name := range held {
		l, err := c.Release(ctx, name, node)
		if err != nil {
			return written, err
		}
		if l != nil {
			written = append(written, l)
		}
	}
	return written, nil
}

// LeaveQueues makes again the queue summaries (among leases, as last read)
// that still name node, which has no request any more. It returns the
// Leases as written.
func (c *Client) LeaveQueues(ctx context.Context, node string, leases []*coordv1.Lease, staleAfter time.Duration) ([]*coordv1.Lease, error) {
	var written []*coordv1.Lease
	for _, g := range lock.QueuesNaming(leases, node) {
		_, l, err := c.Renominate(ctx, g, node, staleAfter)
		if lock.IsFormatError(err) {
			continue // theirs to make, as in HandOff
		}
		if err != nil {
			return written, err
		}
		written = append(written, l)
	}
	return written, nil
}

// markReleased tells the node's agent, through its record, that its lock
// was released by an admin for its current request.
func (c *Client) markReleased(ctx context.Context, node string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := c.leases().Get(ctx, lock.RecordName(node), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil // no record to mark: its agent never published one
		}
		if err != nil {
			return fmt.Errorf("reading the record of %s: %w", node, err)
		}
		if err := lock.CheckFormat(l); err != nil {
			return err // a newer agent's: not to be written over
		}
		r := lock.ReleasedAt(lock.RecordFromLease(l), c.now())
		l = l.DeepCopy()
		r.ApplyTo(l)
		_, err = c.leases().Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
}

// FailedHolder is a lock held by a node whose maintenance lock.Failed.
type FailedHolder struct {
	Lock, Node, Message string
}

// FailedHolders says whether node's group is stuck: every lock of its
// group is held by another node whose record says lock.Failed. It returns those
// holders, or nil when a lock is free, held by node, or held by a node
// that has not failed (or when node has no record).
func (c *Client) FailedHolders(ctx context.Context, node string) ([]FailedHolder, error) {
	me, err := c.GetRecord(ctx, node)
	if err != nil || me == nil {
		return nil, err
	}
	locks, err := c.Locks(ctx)
	if err != nil {
		return nil, err
	}
	var out []FailedHolder
	for i := range locks {
		if g, ok := lock.GroupOfLease(&locks[i]); !ok || g != me.GroupRef() {
			continue
		}
		holder := lock.Holder(&locks[i])
		if holder == "" || holder == node {
			return nil, nil
		}
		r, err := c.GetRecord(ctx, holder)
		if err != nil {
			return nil, err
		}
		if r == nil || r.State != lock.Failed {
			return nil, nil
		}
		out = append(out, FailedHolder{Lock: locks[i].Name, Node: holder, Message: r.Message})
	}
	return out, nil
}
