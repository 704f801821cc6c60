package decide

import (
	"encoding/json"
	"time"

	"github.com/kustodian/kustodian/internal/hostfiles"
	"github.com/kustodian/kustodian/internal/lock"
)

// WriteRecord says whether the agent writes its record r now: when it has
// none stored, when a heartbeat is due (nine tenths of one since the last),
// or when something worth a write changed. While a node waits, its place
// and the holder it waits for change at every handoff: that text goes out
// with the next heartbeat, not at once, so that a handoff does not make
// every waiting agent write.
func WriteRecord(stored *lock.Record, r lock.Record, now time.Time, heartbeat time.Duration) bool {
	if stored == nil || now.Sub(stored.Heartbeat) >= heartbeat*9/10 {
		return true
	}
	textOnly := r.State == lock.Waiting && stored.State == lock.Waiting && sameRecord(withText(*stored, r), r)
	return !sameRecord(*stored, r) && !textOnly
}

// NearBand is how many places at the head of a queue, beyond two per
// slot, renew their records at every heartbeat while they wait: the heads,
// the next in line, and the nodes that pass a head that is gone.
const NearBand = 8

// RecordHeartbeat is how often a node renews its record in decision d:
// every heartbeat, except while it waits far back in its queue (behind the
// first near places (NearBand) and two per slot, or behind a summary's
// last name), where every other heartbeat is enough (the agent renews at
// nine tenths of it, on a timer of its own). A record is stale after four
// heartbeats whatever its place, so a far node still renews twice in that
// time, and a queue of thousands costs about half the writes.
func RecordHeartbeat(heartbeat time.Duration, near int, d Decision) time.Duration {
	if FarBack(near, d) {
		return 2 * heartbeat
	}
	return heartbeat
}

// withText is prev with the text of r: its message and its gates' verdicts.
func withText(prev, r lock.Record) lock.Record {
	prev.Message, prev.Gates = r.Message, r.Gates
	return prev
}

// sameRecord compares what is worth a write.
func sameRecord(a, b lock.Record) bool {
	return a.State == b.State && a.Message == b.Message && a.Reason == b.Reason && a.RequestID == b.RequestID &&
		a.Group == b.Group && a.Priority == b.Priority && a.Blocked == b.Blocked && a.Since.Equal(b.Since) &&
		a.QueueKey == b.QueueKey && a.ReleasedRequest == b.ReleasedRequest && a.Policy == b.Policy &&
		a.Gates == b.Gates && a.BlockedReported == b.BlockedReported && a.AfterFailure == b.AfterFailure && a.ByAdmin == b.ByAdmin &&
		a.Silence == b.Silence
}

// RecordIn is what a node's next record is made of, besides the record it
// has stored.
type RecordIn struct {
	Node     string
	State    lock.State
	Message  string
	Group    lock.GroupRef
	Priority int // the Node's kustodian.io/priority
	// Request is the host's request (nil: none); Quarantined, the request
	// this agent quarantined its node for ("" for none).
	Request     *hostfiles.Request
	Quarantined string
	// Silence is what the record says of the node's silence in
	// Alertmanager.
	Silence string
	// Decision is the Waiting node's decision: the gate that blocks it,
	// every gate's verdict, whether MaintenanceBlocked is said now.
	Decision Decision
	Now      time.Time
}

// Silenced are the states in which the node's alerts are silenced: from
// its cordon until it is given back. A Failed maintenance brings them
// back, so that the failure pages whoever it should.
func Silenced(state lock.State) bool {
	switch state {
	case lock.Draining, lock.InMaintenance, lock.Rebooting, lock.Completing:
		return true
	}
	return false
}

// NextRecord is the node's record for in, after prev (nil: none stored),
// and the state the node comes from as its Events and notifications tell
// it: an admin's release marks the record Failed before the agent sees
// it, and for the agent it is still the way into Failed.
func NextRecord(prev *lock.Record, in RecordIn) (r lock.Record, from lock.State) {
	var p lock.Record
	if prev != nil {
		p = *prev
	}
	r = lock.Record{
		Node:      in.Node,
		State:     in.State,
		Since:     p.Since,
		Message:   in.Message,
		Policy:    in.Group.Policy,
		Group:     in.Group.Group,
		Priority:  in.Priority,
		QueueKey:  p.QueueKey,
		Requested: p.Requested,
		Heartbeat: in.Now,

		ReleasedRequest: p.ReleasedRequest,
	}
	if in.Request != nil && in.Quarantined == in.Request.ID {
		r.ReleasedRequest = in.Quarantined
	}
	if in.Request != nil {
		r.Reason, r.RequestID = in.Request.Reason, in.Request.ID
	} else if in.State == lock.Completing {
		// The script removed the request: the maintenance it asked for
		// keeps its reason to the end (status, the completed message).
		r.Reason = p.Reason
	}
	if in.State == lock.Completing {
		r.AfterFailure = p.FailedBefore()
	}
	if Silenced(in.State) || in.State == lock.Failed || in.State == lock.Waiting {
		r.Silence = in.Silence // kept until expired: Failed and Waiting after a release too
	}
	if in.State == lock.Waiting {
		r.Blocked = in.Decision.Blocked
		r.Gates = gatesJSON(in.Decision.Gates)
		r.BlockedReported = p.State == lock.Waiting && p.BlockedReported || in.Decision.ReportBlocked
	}
	if p.State != in.State || r.Since.IsZero() {
		r.Since = in.Now.Truncate(time.Second)
	}
	if r.Requested.IsZero() {
		r.Requested = in.Now
	}
	from = p.State
	if in.State == lock.Failed && p.State == lock.Failed && p.ByAdmin {
		from = ""
	}
	return r, from
}

// gatesJSON is the gates' verdicts as the record keeps them.
func gatesJSON(gates []GateVerdict) string {
	if len(gates) == 0 {
		return ""
	}
	b, err := json.Marshal(gates)
	if err != nil {
		return ""
	}
	return string(b)
}

// Completing's messages: after a maintenance that succeeded, and after
// one that failed and was repaired (the request removed; see
// lock.Record.FailedBefore).
const (
	CompletingMessage      = "completing: uncordoning and releasing the lock"
	CompletingAfterFailure = "completing after a failed maintenance: uncordoning and releasing the lock"
)

// ending is the record's message of a node whose maintenance ends:
// Completing, or Failed (a drain that failed and holds, or a lock an admin
// released, or this node's own quarantine, which its mark tells from an
// admin's release across restarts).
func ending(s Snapshot, o Observed, state lock.State) string {
	switch {
	case state == lock.Completing && s.Own != nil && s.Own.FailedBefore():
		return CompletingAfterFailure
	case state == lock.Completing:
		return CompletingMessage
	case !o.Released():
		return s.FailedWhy
	case s.Own != nil && s.Own.State == lock.Failed && !s.Own.ByAdmin && s.Self != nil && s.Self.Quarantined:
		return s.Own.Message // released by this agent itself: quarantined
	}
	return "lock released by an admin; remove " + s.Params.RequestFile + " once the node is repaired (a new request starts over)"
}
