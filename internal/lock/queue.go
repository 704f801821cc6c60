package lock

import (
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/util/resourceversion"
)

// Queue is the live Waiting records of a group in grant order: priority
// descending, then arrival order, then node name. Arrival order is the order
// in which the records reached the API server (their QueueKey, compared as
// resource versions); clocks of different hosts never decide it. A record
// whose heartbeat is stale (its agent is gone) drops out.
func Queue(records []Record, group GroupRef, now time.Time, staleAfter time.Duration) []Record {
	var q []Record
	for _, r := range records {
		if r.State == Waiting && r.GroupRef() == group && r.Live(now, staleAfter) {
			q = append(q, r)
		}
	}
	sort.SliceStable(q, func(i, j int) bool {
		a, b := q[i], q[j]
		if a.Priority != b.Priority {
			return a.Priority > b.Priority
		}
		if cmp, err := resourceversion.CompareResourceVersion(a.QueueKey, b.QueueKey); err == nil && cmp != 0 {
			return cmp < 0
		}
		if !a.Requested.Equal(b.Requested) {
			return a.Requested.Before(b.Requested)
		}
		return a.Node < b.Node
	})
	return q
}

// Position is node's 1-based place in the queue, and the queue's length;
// 0 when node is not in it.
func Position(queue []Record, node string) (pos, total int) {
	for i, r := range queue {
		if r.Node == node {
			return i + 1, len(queue)
		}
	}
	return 0, len(queue)
}

// MayTry reports whether node is among the first freeSlots eligible records
// of the queue: only those try to take a lock, the others just watch.
// Records whose own gates are closed (Blocked) are skipped, so they never
// hold back the nodes behind them.
func MayTry(queue []Record, node string, freeSlots int) bool {
	n := 0
	for _, r := range queue {
		if r.Blocked != "" {
			continue
		}
		if n >= freeSlots {
			return false
		}
		if r.Node == node {
			return true
		}
		n++
	}
	return false
}
