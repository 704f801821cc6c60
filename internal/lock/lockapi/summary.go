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

// Summarize makes the summary of group from one LIST of the namespace's
// Leases; self, the caller's node, counts as live. A record of the group
// in a format this build does not read (by the group it says) is a
// *lock.FormatError: no summary is made without it.
func (c *Client) Summarize(ctx context.Context, group lock.GroupRef, self string, staleAfter time.Duration) (lock.Summary, error) {
	list, err := c.Kube.CoordinationV1().Leases(c.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return lock.Summary{}, fmt.Errorf("listing the Leases of %s: %w", c.Namespace, err)
	}
	var records []lock.Record
	for i := range list.Items {
		if !lock.IsRecordName(list.Items[i].Name) {
			continue
		}
		r := lock.RecordFromLease(&list.Items[i])
		if err := lock.CheckFormat(&list.Items[i]); err != nil {
			if r.GroupRef() == group {
				return lock.Summary{}, err
			}
			continue // another group's: not in this queue
		}
		records = append(records, r)
	}
	return lock.Summarize(records, group, self, c.now(), staleAfter, list.ResourceVersion), nil
}

// Renominate makes the summary of group again (lock.Summarize) and writes it,
// unless the one stored was made from a newer LIST meanwhile. by names the
// writer. It returns the summary made and the queue Lease as stored.
func (c *Client) Renominate(ctx context.Context, group lock.GroupRef, by string, staleAfter time.Duration) (lock.Summary, *coordv1.Lease, error) {
	s, err := c.Summarize(ctx, group, by, staleAfter)
	if err != nil {
		return s, nil, err
	}
	l, err := c.PutSummary(ctx, group, s, by)
	return s, l, err
}

// PutSummary writes group's summary unless the one stored is newer (made
// from a later LIST), and returns the queue Lease as stored.
func (c *Client) PutSummary(ctx context.Context, group lock.GroupRef, s lock.Summary, by string) (*coordv1.Lease, error) {
	name := group.QueueName()
	var stored *coordv1.Lease
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := c.leases().Get(ctx, name, metav1.GetOptions{})
		found := err == nil
		switch {
		case apierrors.IsNotFound(err):
			l = &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace}}
		case err != nil:
			return fmt.Errorf("reading %s/%s: %w", c.Namespace, name, err)
		default:
			l = l.DeepCopy()
		}
		if changed, err := lock.StoreSummary(l, group, s, by, c.now()); err != nil || !changed {
			stored = l // a newer summary is there already
			return err
		}
		if !found {
			stored, err = c.leases().Create(ctx, l, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(coordv1.Resource("leases"), name, err)
			}
		} else {
			stored, err = c.leases().Update(ctx, l, metav1.UpdateOptions{})
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("writing the queue %s/%s: %w", c.Namespace, name, err)
	}
	return stored, nil
}

// TouchSummary renews the queue Lease's renewTime, telling the group that
// the head of its queue is alive and waiting (on a window, spacing, a
// health gate). A conflict means someone wrote it meanwhile, which says as
// much: not an error. A queue Lease in a newer format is a
// *lock.FormatError.
func (c *Client) TouchSummary(ctx context.Context, current *coordv1.Lease, by string) (*coordv1.Lease, error) {
	if err := lock.CheckFormat(current); err != nil {
		return nil, err
	}
	l := current.DeepCopy()
	lock.TouchSummary(l, by, c.now())
	stored, err := c.leases().Update(ctx, l, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("renewing the queue %s/%s: %w", c.Namespace, l.Name, err)
	}
	return stored, nil
}
