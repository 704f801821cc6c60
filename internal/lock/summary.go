package lock

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/util/retry"
)

// The queue of a group is kept on the lock side, so that a waiting agent
// never needs the other agents' records (docs/agent.md, "What an agent
// watches"): the Lease queue-<policy>[-<group>] holds the group's Summary,
// written with one LIST of the records by whoever changes the queue's head
// (a node releasing a lock, a node whose turn passes, a node that finds the
// summary missing or out of date). Waiting agents watch the lock and queue
// Leases and their own record only.
const (
	queuePrefix = "queue-"
	// AnnotationQueue is the Summary, as JSON.
	AnnotationQueue = "kustodian.io/queue"
	// AnnotationQueueBy names who wrote the summary: a node, or
	// kustodian-ctl. The admission policy holds a node to its own name.
	AnnotationQueueBy = "kustodian.io/queue-by"
	// MaxSummaryBytes bounds the summary: the nodes it names are the head
	// of the queue, as many as fit.
	MaxSummaryBytes = 8192
)

// IsQueueName tells the Leases that hold a group's queue summary.
func IsQueueName(name string) bool {
	return len(name) > len(queuePrefix) && name[:len(queuePrefix)] == queuePrefix
}

// QueueName is the Lease of the group's queue summary:
// queue-<policy>[-<group>].
func (g GroupRef) QueueName() string {
	if g.Group == "" {
		return queuePrefix + g.Policy
	}
	return queuePrefix + g.Policy + "-" + segment(g.Group)
}

// Summary is the head of a group's queue as of one LIST of the records:
// the live, eligible (Waiting, not Blocked) records of the group in grant
// order (see Queue).
type Summary struct {
	// Nodes are the first nodes of the queue, in order, as many as fit in
	// MaxSummaryBytes.
	Nodes []string `json:"nodes"`
	// Total is how many were eligible: more than len(Nodes) when the
	// summary was cut.
	Total int `json:"total"`
	// ListRV is the resourceVersion of the LIST it was made from: every
	// record that reached the API server before it was considered.
	ListRV string `json:"listRV"`
	// Last is where the last named node stands in the order: a node that
	// sorts before it and is not named was left out (blocked, or not live
	// at the time) and must have the summary made again.
	Last *Place `json:"last,omitempty"`

	// By is who wrote it (AnnotationQueueBy).
	By string `json:"-"`
}

// Place is a record's place in the grant order.
type Place struct {
	Priority int    `json:"priority,omitempty"`
	Key      string `json:"key"`
}

// PlaceOf is a record's place.
func PlaceOf(r Record) Place { return Place{Priority: r.Priority, Key: r.QueueKey} }

// Before reports whether a sorts before b in the grant order (priority
// descending, then arrival). Keys that are not resource versions compare as
// equal, and then neither is before the other.
func (a Place) Before(b Place) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	cmp, err := resourceversion.CompareResourceVersion(a.Key, b.Key)
	return err == nil && cmp < 0
}

// Cut reports whether the summary names fewer nodes than were eligible.
func (s Summary) Cut() bool { return len(s.Nodes) < s.Total }

// Index is node's 0-based place among the summary's nodes, or -1.
func (s Summary) Index(node string) int {
	for i, n := range s.Nodes {
		if n == node {
			return i
		}
	}
	return -1
}

// SummaryFromLease reads a queue Lease. A summary that does not read is an
// error: the caller makes it again.
func SummaryFromLease(l *coordv1.Lease) (Summary, error) {
	var s Summary
	v, ok := l.Annotations[AnnotationQueue]
	if !ok {
		return s, fmt.Errorf("queue Lease %s has no %s", l.Name, AnnotationQueue)
	}
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return Summary{}, fmt.Errorf("queue Lease %s: %s: %w", l.Name, AnnotationQueue, err)
	}
	if s.Total < len(s.Nodes) || s.Total < 0 {
		return Summary{}, fmt.Errorf("queue Lease %s: %s names %d nodes of %d", l.Name, AnnotationQueue, len(s.Nodes), s.Total)
	}
	if _, err := resourceversion.CompareResourceVersion(s.ListRV, s.ListRV); err != nil {
		return Summary{}, fmt.Errorf("queue Lease %s: %s: listRV %q is not a resource version", l.Name, AnnotationQueue, s.ListRV)
	}
	s.By = l.Annotations[AnnotationQueueBy]
	return s, nil
}

// Summarize makes the summary of group from all the records: the live,
// eligible records in grant order. self counts as live whatever its
// heartbeat says: the caller is its agent, alive.
func Summarize(records []Record, group GroupRef, self string, now time.Time, staleAfter time.Duration, listRV string) Summary {
	var eligible []Record
	for _, r := range records {
		if r.Node == self {
			r.Heartbeat = now
		}
		if r.Blocked == "" {
			eligible = append(eligible, r)
		}
	}
	q := Queue(eligible, group, now, staleAfter)
	s := Summary{Total: len(q), ListRV: listRV, Nodes: []string{}}
	size := len(`{"nodes":[],"total":,"listRV":"","last":{"priority":,"key":""}}`) + 64 + len(listRV)
	for _, r := range q {
		size += len(r.Node) + 3 // quotes and comma
		if size+len(r.QueueKey) > MaxSummaryBytes {
			break
		}
		s.Nodes = append(s.Nodes, r.Node)
		p := PlaceOf(r)
		s.Last = &p
	}
	return s
}

// Summarize makes the summary of group from one LIST of the namespace's
// Leases; self, the caller's node, counts as live.
func (c *Client) Summarize(ctx context.Context, group GroupRef, self string, staleAfter time.Duration) (Summary, error) {
	list, err := c.Kube.CoordinationV1().Leases(c.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return Summary{}, fmt.Errorf("listing the Leases of %s: %w", c.Namespace, err)
	}
	var records []Record
	for i := range list.Items {
		if IsRecordName(list.Items[i].Name) {
			records = append(records, RecordFromLease(&list.Items[i]))
		}
	}
	return Summarize(records, group, self, c.now(), staleAfter, list.ResourceVersion), nil
}

// Renominate makes the summary of group again (Summarize) and writes it,
// unless the one stored was made from a newer LIST meanwhile. by names the
// writer. It returns the summary made and the queue Lease as stored.
func (c *Client) Renominate(ctx context.Context, group GroupRef, by string, staleAfter time.Duration) (Summary, *coordv1.Lease, error) {
	s, err := c.Summarize(ctx, group, by, staleAfter)
	if err != nil {
		return s, nil, err
	}
	l, err := c.PutSummary(ctx, group, s, by)
	return s, l, err
}

// PutSummary writes group's summary unless the one stored is newer (made
// from a later LIST), and returns the queue Lease as stored.
func (c *Client) PutSummary(ctx context.Context, group GroupRef, s Summary, by string) (*coordv1.Lease, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	name := group.QueueName()
	var stored *coordv1.Lease
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := c.leases().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			l = &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace}}
		case err != nil:
			return fmt.Errorf("reading %s/%s: %w", c.Namespace, name, err)
		default:
			if old, err := SummaryFromLease(l); err == nil {
				if cmp, err := resourceversion.CompareResourceVersion(old.ListRV, s.ListRV); err == nil && cmp > 0 {
					stored = l
					return nil // a newer summary is there already
				}
			}
			l = l.DeepCopy()
		}
		markGroup(l, group)
		l.Labels[LabelManagedBy] = ManagedBy
		l.Annotations[AnnotationQueue] = string(b)
		l.Annotations[AnnotationQueueBy] = by
		t := metav1.NewMicroTime(c.now())
		l.Spec.RenewTime = &t
		if l.ResourceVersion == "" {
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
// much: not an error.
func (c *Client) TouchSummary(ctx context.Context, current *coordv1.Lease, by string) (*coordv1.Lease, error) {
	l := current.DeepCopy()
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[AnnotationQueueBy] = by
	t := metav1.NewMicroTime(c.now())
	l.Spec.RenewTime = &t
	stored, err := c.leases().Update(ctx, l, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("renewing the queue %s/%s: %w", c.Namespace, l.Name, err)
	}
	return stored, nil
}
