package lock

import (
	"sort"
	"time"
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
		if cmp, ok := VersionOrder(a.QueueKey, b.QueueKey); ok && cmp != 0 {
			return cmp < 0
		}
		if !a.Requested.Equal(b.Requested) {
			return a.Requested.Before(b.Requested)
		}
		return a.Node < b.Node
	})
	return q
}

// GrantOrder is the order in which the group's nodes get the lock: the
// queue (Queue) without the nodes whose own gates are closed (Blocked),
// which the others pass until their gates open. The agents' queue
// summaries and kustodian-ctl's positions are both this order.
func GrantOrder(records []Record, group GroupRef, now time.Time, staleAfter time.Duration) []Record {
	var eligible []Record
	for _, r := range records {
		if !r.OwnGateClosed() {
			eligible = append(eligible, r)
		}
	}
	return Queue(eligible, group, now, staleAfter)
}
