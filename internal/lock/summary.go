package lock

import (
	"encoding/json"
	"fmt"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
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
	cmp, ok := VersionOrder(a.Key, b.Key)
	return ok && cmp < 0
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

// LeavesOut reports whether the summary should name own and does not,
// and is newer than mine (the node's own view of the queue): own's record
// reached the API server before the summary's LIST and the summary was not
// cut short, or own sorts before the last node it names (a higher
// priority).
func (s Summary) LeavesOut(own Record, mine Summary) bool {
	if s.Index(own.Node) >= 0 {
		return false
	}
	p := PlaceOf(own)
	before := s.Last != nil && p.Before(*s.Last)
	listed, ok := VersionOrder(s.ListRV, mine.ListRV)
	if !ok || listed <= 0 {
		return false // not newer than the node's own view
	}
	if before {
		return true
	}
	arrived, ok := VersionOrder(p.Key, s.ListRV)
	return !s.Cut() && !(ok && arrived > 0)
}

// SummaryFromLease reads a queue Lease. A summary that does not read is an
// error: the caller makes it again.
func SummaryFromLease(l *coordv1.Lease) (Summary, error) {
	var s Summary
	if err := CheckFormat(l); err != nil {
		return s, err
	}
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
	if _, ok := VersionOrder(s.ListRV, s.ListRV); !ok {
		return Summary{}, fmt.Errorf("queue Lease %s: %s: listRV %q is not a resource version", l.Name, AnnotationQueue, s.ListRV)
	}
	s.By = l.Annotations[AnnotationQueueBy]
	return s, nil
}

// Summarize makes the summary of group from all the records: the live,
// eligible records in grant order. self counts as live whatever its
// heartbeat says: the caller is its agent, alive.
func Summarize(records []Record, group GroupRef, self string, now time.Time, staleAfter time.Duration, listRV string) Summary {
	mine := make([]Record, len(records))
	for i, r := range records {
		if r.Node == self {
			r.Heartbeat = now
		}
		mine[i] = r
	}
	q := GrantOrder(mine, group, now, staleAfter)
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
