package lock

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

// FactsFunc looks up what Decide needs to know about a lock's holder.
type FactsFunc func(ctx context.Context, holder string) (HolderFacts, error)

// Params of a decision that are configuration.
type Params struct {
	StaleAfter time.Duration // a record without heartbeat for this long is dead
	TTL        time.Duration // 0: locks never expire
}

// Acquire takes the lock for node if Decide says it is free: it reads the
// Lease, decides, and writes it back with the resourceVersion it read, so of
// two agents racing exactly one wins. A lost race (409) or a lock that is
// not free returns false with the verdict and no error: re-read and re-decide.
func (c *Client) Acquire(ctx context.Context, name, node string, p Params, facts FactsFunc) (bool, Verdict, error) {
	now := c.now()
	l, err := c.leases().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace}}
		setHolder(l, node, now, p.TTL)
		_, err := c.leases().Create(ctx, l, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return false, Verdict{Why: "lost the race to create " + name}, nil
		}
		if err != nil {
			return false, Verdict{}, fmt.Errorf("creating lock %s/%s: %w", c.Namespace, name, err)
		}
		return true, Verdict{Free: true}, nil
	}
	if err != nil {
		return false, Verdict{}, fmt.Errorf("reading lock %s/%s: %w", c.Namespace, name, err)
	}
	holder := Holder(l)
	if holder == node {
		return true, Verdict{Free: true, Why: "already held by this node"}, nil
	}
	var hf HolderFacts
	if holder != "" {
		if hf, err = facts(ctx, holder); err != nil {
			return false, Verdict{}, err
		}
	}
	v := Decide(l, node, hf, now, p.StaleAfter, p.TTL)
	if !v.Free {
		return false, v, nil
	}
	setHolder(l, node, now, p.TTL)
	if _, err := c.leases().Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			return false, Verdict{Why: "lost the race for " + name}, nil
		}
		return false, Verdict{}, fmt.Errorf("taking lock %s/%s: %w", c.Namespace, name, err)
	}
	return true, v, nil
}

func setHolder(l *coordv1.Lease, node string, now time.Time, ttl time.Duration) {
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[LabelManagedBy] = ManagedBy
	l.Spec.HolderIdentity = &node
	t := metav1.NewMicroTime(now)
	l.Spec.AcquireTime = &t
	l.Spec.RenewTime = &t
	l.Spec.LeaseDurationSeconds = nil
	if ttl > 0 {
		s := int32(ttl.Seconds())
		l.Spec.LeaseDurationSeconds = &s
	}
}

// ErrNotHeld is returned by Renew when node does not hold the lock.
var ErrNotHeld = errors.New("lock not held")

// Release clears the lock if node holds it. A lock held by someone else, or
// absent, is not an error: releasing is idempotent.
func (c *Client) Release(ctx context.Context, name, node string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := c.leases().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading lock %s/%s: %w", c.Namespace, name, err)
		}
		if Holder(l) != node {
			return nil
		}
		empty := ""
		l.Spec.HolderIdentity = &empty
		l.Spec.AcquireTime = nil
		l.Spec.RenewTime = nil
		l.Spec.LeaseDurationSeconds = nil
		_, err = c.leases().Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
}

// Renew refreshes renewTime of a lock node holds (needed only with a TTL).
func (c *Client) Renew(ctx context.Context, name, node string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := c.leases().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading lock %s/%s: %w", c.Namespace, name, err)
		}
		if Holder(l) != node {
			return ErrNotHeld
		}
		t := metav1.NewMicroTime(c.now())
		l.Spec.RenewTime = &t
		_, err = c.leases().Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
}

// PutRecord creates or updates node's record. Fields of the record replace
// those stored; the agent is the only regular writer of its own record.
func (c *Client) PutRecord(ctx context.Context, r Record) error {
	name := RecordName(r.Node)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := c.leases().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			l = &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace}}
			r.ApplyTo(l)
			_, err = c.leases().Create(ctx, l, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(coordv1.Resource("leases"), name, err)
			}
			return err
		}
		if err != nil {
			return err
		}
		r.ApplyTo(l)
		_, err = c.leases().Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
}

// GetRecord reads node's record; nil when there is none.
func (c *Client) GetRecord(ctx context.Context, node string) (*Record, error) {
	l, err := c.leases().Get(ctx, RecordName(node), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading record %s/%s: %w", c.Namespace, RecordName(node), err)
	}
	r := RecordFromLease(l)
	return &r, nil
}

// DeleteRecord removes node's record; one already gone is fine.
func (c *Client) DeleteRecord(ctx context.Context, node string) error {
	err := c.leases().Delete(ctx, RecordName(node), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting record %s/%s: %w", c.Namespace, RecordName(node), err)
	}
	return nil
}
