package lock

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// ReleasedByAdmin is the record message of a node whose locks an admin
// broke (kustodian-ctl release).
const ReleasedByAdmin = "lock released by an admin (kustodian-ctl release)"

// ReleaseByAdmin breaks the locks node holds, for an admin whose node's
// maintenance failed: it marks the node's record Failed for its current
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
	var held []string
	groups := map[GroupRef]bool{}
	var order []GroupRef
	for i := range locks {
		if Holder(&locks[i]) != node {
			continue
		}
		held = append(held, locks[i].Name)
		if g, ok := GroupOfLease(&locks[i]); ok && !groups[g] {
			groups[g] = true
			order = append(order, g)
		}
	}
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
	for _, g := range order {
		if _, _, err := c.Renominate(ctx, g, by, staleAfter); err != nil {
			return nil, err
		}
	}
	for _, name := range held {
		if _, err := c.Release(ctx, name, node); err != nil {
			return nil, err
		}
	}
	return held, nil
}

// markReleased tells the node's agent, through its record, that its lock
// was released by an admin for its current request.
func (c *Client) markReleased(ctx context.Context, node string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := c.leases().Get(ctx, RecordName(node), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil // no record to mark: its agent never published one
		}
		if err != nil {
			return fmt.Errorf("reading the record of %s: %w", node, err)
		}
		r := RecordFromLease(l)
		r.ReleasedRequest = r.RequestID
		if r.ReleasedRequest == "" {
			r.ReleasedRequest = "*"
		}
		r.State = Failed
		r.Since = c.now().Truncate(time.Second)
		r.Message = ReleasedByAdmin
		l = l.DeepCopy()
		r.ApplyTo(l)
		_, err = c.leases().Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
}

// FailedHolder is a lock held by a node whose maintenance Failed.
type FailedHolder struct {
	Lock, Node, Message string
}

// FailedHolders says whether node's group is stuck: every lock of its
// group is held by another node whose record says Failed. It returns those
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
		if g, ok := GroupOfLease(&locks[i]); !ok || g != me.GroupRef() {
			continue
		}
		holder := Holder(&locks[i])
		if holder == "" || holder == node {
			return nil, nil
		}
		r, err := c.GetRecord(ctx, holder)
		if err != nil {
			return nil, err
		}
		if r == nil || r.State != Failed {
			return nil, nil
		}
		out = append(out, FailedHolder{Lock: locks[i].Name, Node: holder, Message: r.Message})
	}
	return out, nil
}
