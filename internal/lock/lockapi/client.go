// Package lockapi reads and writes the lock protocol's objects (package
// lock) on the API server: it takes, gives back and renews locks, writes
// records and queue summaries, and does an admin's release, each as one
// read and one write that the API server orders by resourceVersion.
package lockapi

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kustodian/kustodian/internal/lock"
)

// Client reads and writes the protocol's Leases in one namespace.
type Client struct {
	Kube      kubernetes.Interface
	Namespace string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (c *Client) now() time.Time {
	if c.Now != nil {
		return c.Now()
	}
	return time.Now()
}

func (c *Client) leases() interface {
	Get(context.Context, string, metav1.GetOptions) (*coordv1.Lease, error)
	Create(context.Context, *coordv1.Lease, metav1.CreateOptions) (*coordv1.Lease, error)
	Update(context.Context, *coordv1.Lease, metav1.UpdateOptions) (*coordv1.Lease, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
} {
	return c.Kube.CoordinationV1().Leases(c.Namespace)
}

// FactsFunc looks up what lock.Decide needs to know about a lock's holder.
type FactsFunc func(ctx context.Context, holder string) (lock.HolderFacts, error)

// Acquire takes the lock for node if lock.Decide says it is free. It decides on
// current (the caller's cached copy) or, when current is nil, on a fresh
// read, and writes the Lease back with that resourceVersion, so of two
// agents racing exactly one wins. A lost race (409) or a lock that is not
// free returns a nil Lease with the verdict and no error: re-read and
// re-decide. On success it returns the Lease as written.
func (c *Client) Acquire(ctx context.Context, name string, group lock.GroupRef, node string, current *coordv1.Lease, p lock.Params, facts FactsFunc) (*coordv1.Lease, lock.Verdict, error) {
	now := c.now()
	l := current
	if l == nil {
		var err error
		l, err = c.leases().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			l = nil
		} else if err != nil {
			return nil, lock.Verdict{}, fmt.Errorf("reading lock %s/%s: %w", c.Namespace, name, err)
		}
	}
	if l == nil {
		l = &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace}}
		lock.Take(l, group, node, now, p)
		lock.MarkFormat(l)
		created, err := c.leases().Create(ctx, l, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil, lock.Verdict{Why: "lost the race to create " + name}, nil
		}
		if err != nil {
			return nil, lock.Verdict{}, fmt.Errorf("creating lock %s/%s: %w", c.Namespace, name, err)
		}
		return created, lock.Verdict{Free: true}, nil
	}
	if err := lock.CheckFormat(l); err != nil {
		return nil, lock.Verdict{Why: err.Error()}, nil
	}
	holder := lock.Holder(l)
	if holder == node {
		return l, lock.Verdict{Free: true, Why: "already held by this node"}, nil
	}
	var hf lock.HolderFacts
	if holder != "" {
		var err error
		if hf, err = facts(ctx, holder); err != nil {
			return nil, lock.Verdict{}, err
		}
	}
	v := lock.Decide(lock.LockOf(l), node, hf, now, p)
	if !v.Free {
		return nil, v, nil
	}
	if g, ok := lock.GroupOfLease(l); ok && g != group {
		return nil, lock.Verdict{Why: fmt.Sprintf("%s belongs to group %s, not %s: two policies make the same lock name; rename one", name, g, group)}, nil
	}
	l = l.DeepCopy()
	lock.Take(l, group, node, now, p)
	updated, err := c.leases().Update(ctx, l, metav1.UpdateOptions{})
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil, lock.Verdict{Why: "lost the race for " + name}, nil
		}
		return nil, lock.Verdict{}, fmt.Errorf("taking lock %s/%s: %w", c.Namespace, name, err)
	}
	return updated, v, nil
}

// ErrNotHeld is returned by Renew when node does not hold the lock.
var ErrNotHeld = errors.New("lock not held")

// Release clears the lock if node holds it and returns the Lease as written.
// A lock held by someone else, or absent, is not an error (nil Lease):
// releasing is idempotent. A lock in a newer format is a *lock.FormatError,
// and left as it is.
func (c *Client) Release(ctx context.Context, name, node string) (*coordv1.Lease, error) {
	var written *coordv1.Lease
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		written = nil
		l, err := c.leases().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading lock %s/%s: %w", c.Namespace, name, err)
		}
		if lock.Holder(l) != node {
			return nil
		}
		if err := lock.CheckFormat(l); err != nil {
			return err // a newer agent's: not to be written over
		}
		l = l.DeepCopy()
		lock.Free(l, c.now())
		written, err = c.leases().Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("releasing lock %s/%s: %w", c.Namespace, name, err)
	}
	return written, nil
}

// SetDisrupted records on a lock that node holds which controllers lost
// pods to its drain (see AnnotationDisrupted), and returns the Lease as
// written; ErrNotHeld when node does not hold it.
func (c *Client) SetDisrupted(ctx context.Context, name, node string, controllers []string) (*coordv1.Lease, error) {
	return c.updateHeld(ctx, name, node, func(l *coordv1.Lease) { lock.SetDisrupted(l, controllers) })
}

// Renew refreshes renewTime of a lock node holds (needed only with a TTL)
// and returns the Lease as written; ErrNotHeld when node lost it.
func (c *Client) Renew(ctx context.Context, name, node string) (*coordv1.Lease, error) {
	return c.updateHeld(ctx, name, node, func(l *coordv1.Lease) {
		t := metav1.NewMicroTime(c.now())
		l.Spec.RenewTime = &t
	})
}

// updateHeld changes a lock that node holds, reading it afresh after a
// conflict; ErrNotHeld when node does not hold it, a *lock.FormatError
// when it is in a newer format.
func (c *Client) updateHeld(ctx context.Context, name, node string, change func(*coordv1.Lease)) (*coordv1.Lease, error) {
	var written *coordv1.Lease
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := c.leases().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading lock %s/%s: %w", c.Namespace, name, err)
		}
		if lock.Holder(l) != node {
			return ErrNotHeld
		}
		if err := lock.CheckFormat(l); err != nil {
			return err
		}
		change(l)
		written, err = c.leases().Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
	return written, err
}

// PutRecord creates or updates node's record and returns it as written. It
// updates base (the caller's cached copy) when given, and reads the record
// afresh after a conflict. The agent is the only regular writer of its own
// record.
func (c *Client) PutRecord(ctx context.Context, base *coordv1.Lease, r lock.Record) (*coordv1.Lease, error) {
	name := lock.RecordName(r.Node)
	var written *coordv1.Lease
	first := true
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l := base
		if !first || l == nil {
			var err error
			l, err = c.leases().Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				l = nil
			} else if err != nil {
				return err
			}
		}
		first = false
		if l == nil {
			// The queue key of a new record is the resourceVersion the API
			// server gives it (the admission policy refuses any other).
			r.QueueKey = ""
			l = &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace}}
			r.ApplyTo(l)
			created, err := c.leases().Create(ctx, l, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(coordv1.Resource("leases"), name, err)
			}
			written = created
			return err
		}
		if err := lock.CheckFormat(l); err != nil {
			return err // written by a newer agent since: not to be written over
		}
		if r.ReleasedRequest == "" {
			// An admin's mark (kustodian-ctl release) is not the agent's
			// to drop, even when the agent decided on an older copy.
			r.ReleasedRequest = lock.RecordFromLease(l).ReleasedRequest
		}
		// The queue key is the record's as stored, or, until stored, the
		// version being updated (that of its creation, unless an admin
		// wrote it since): never an older copy's.
		r.QueueKey = lock.RecordFromLease(l).QueueKey
		l = l.DeepCopy()
		r.ApplyTo(l)
		updated, err := c.leases().Update(ctx, l, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			// Deleted since it was read (an admin cleaning up): create it.
			return apierrors.NewConflict(coordv1.Resource("leases"), name, err)
		}
		written = updated
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("writing record %s/%s: %w", c.Namespace, name, err)
	}
	return written, nil
}

// GetRecord reads node's record; nil when there is none, a
// *lock.FormatError when it is in a format this build does not read.
func (c *Client) GetRecord(ctx context.Context, node string) (*lock.Record, error) {
	l, err := c.leases().Get(ctx, lock.RecordName(node), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading record %s/%s: %w", c.Namespace, lock.RecordName(node), err)
	}
	if err := lock.CheckFormat(l); err != nil {
		return nil, err
	}
	r := lock.RecordFromLease(l)
	return &r, nil
}

// DeleteRecord removes node's record; one already gone is fine.
func (c *Client) DeleteRecord(ctx context.Context, node string) error {
	err := c.leases().Delete(ctx, lock.RecordName(node), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting record %s/%s: %w", c.Namespace, lock.RecordName(node), err)
	}
	return nil
}

// Locks lists the lock Leases of the namespace (one LIST).
func (c *Client) Locks(ctx context.Context) ([]coordv1.Lease, error) {
	list, err := c.Kube.CoordinationV1().Leases(c.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the Leases of %s: %w", c.Namespace, err)
	}
	var out []coordv1.Lease
	for _, l := range list.Items {
		if lock.IsLockName(l.Name) {
			out = append(out, l)
		}
	}
	return out, nil
}

// Holds reads lock name from the API server (not a cache) and reports
// whether node holds it.
func (c *Client) Holds(ctx context.Context, name, node string) (bool, error) {
	l, err := c.leases().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading lock %s/%s: %w", c.Namespace, name, err)
	}
	return lock.Holder(l) == node, nil
}

// HeldBy is the name of a lock that node holds, or "".
func (c *Client) HeldBy(ctx context.Context, node string) (string, error) {
	locks, err := c.Locks(ctx)
	if err != nil {
		return "", err
	}
	for _, l := range locks {
		if lock.Holder(&l) == node {
			return l.Name, nil
		}
	}
	return "", nil
}
