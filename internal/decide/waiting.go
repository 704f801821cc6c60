package decide

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/policy"
)

// waiting decides for a Waiting node: its own gates first (a node whose own
// gate is closed is Blocked, and the nodes behind it pass it), then its
// place in the queue, then, only at the head, the group's and the cluster's
// gates, then the locks. What it reads of the node (ownGates), of the
// queue (queueAt) and of the group (groupGates) is read each in one go;
// the rules that weigh them are here.
func waiting(s Snapshot, d *Decision) {
	own, wake, mismatch := ownGates(s, d)
	d.WakeAt = earliest(d.WakeAt, wake)
	if mismatch != "" {
		d.Gates = append(own, uncheckedFrom(GateCommand)...)
		d.hold(GatePolicy, mismatch, false)
		return
	}
	q := queueAt(s, d)
	if len(q.need) > 0 {
		d.Need.Holders = q.need
		return
	}
	d.Position, d.Total, d.BehindCut, d.Ahead = q.position, q.total, q.behindCut, q.ahead
	upkeep := func() bool {
		if !q.upkeep.wait {
			d.WakeAt = earliest(d.WakeAt, q.upkeep.wake)
			return false
		}
		if q.upkeep.list && s.Listed {
			// The LIST just made does not show this node where its record,
			// as this agent last saw it, says it is: the record as stored
			// is another (someone else wrote or deleted it). Another LIST
			// would say the same; the step writes the record again, and
			// the next decision looks again.
			d.Unlisted = true
		} else {
			d.Need.Queue = q.upkeep.list
		}
		d.Renominate, d.Takeover = q.upkeep.renominate, q.upkeep.takeover
		return true
	}
	touch := func() {
		d.WakeAt = earliest(d.WakeAt, q.touch.wake)
		d.Touch = q.touch.now
	}
	blocked := s.Own != nil && s.Own.OwnGateClosed()
	spec := d.Policy.Spec

	if g := firstClosed(own); g != nil {
		d.Gates = append(own, uncheckedFrom(GateCommand)...)
		d.hold(g.Gate, g.Reason, nodeSpecific(g.Gate))
		d.reportBlocked(s, spec)
		if nodeSpecific(g.Gate) {
			// Its turn passes to the next node, once its record says it
			// is blocked (or the summary made again would name it still).
			if q.heads && blocked {
				d.Renominate = "this node heads the queue but is blocked: " + g.Reason
			}
			return
		}
		// A gate closed for the whole group: the head stays the head.
		if !upkeep() {
			touch()
		}
		return
	}
	if upkeep() {
		d.Gates = append(own, GateVerdict{GateQueue, Closed, strings.TrimPrefix(q.message, "waiting: ")})
		d.Gates = append(d.Gates, uncheckedFrom(GateCommand, GateQueue)...)
		d.Message = q.message
		d.Gate = GateQueue
		return
	}

	if s.HasCommand {
		switch {
		case !q.atHead:
			own = append(own, GateVerdict{Gate: GateCommand, Verdict: Unchecked, Reason: "checked at the head of the queue"})
		case s.Command == nil || s.stale(s.Command.At):
			d.Need.Command = true
			return
		case !s.Command.OK:
			own = append(own, GateVerdict{GateCommand, Closed, "gate command: " + s.Command.Reason})
		default:
			own = append(own, GateVerdict{Gate: GateCommand, Verdict: Open})
		}
	} else {
		own = append(own, GateVerdict{Gate: GateCommand, Verdict: Open})
	}
	if g := firstClosed(own); g != nil {
		d.Gates = append(own, uncheckedFrom(GateQueue)...)
		d.hold(g.Gate, g.Reason, true)
		d.WakeAt = earliest(d.WakeAt, s.Now.Add(s.Params.Poll))
		d.reportBlocked(s, spec)
		if blocked {
			d.Renominate = "this node heads the queue but is blocked: " + g.Reason
		}
		return
	}
	if !q.atHead {
		d.Gates = append(own, GateVerdict{GateQueue, Closed, strings.TrimPrefix(q.message, "waiting: ")})
		d.Gates = append(d.Gates, uncheckedFrom(GateSpacing)...)
		d.Message = q.message
		d.Gate = GateQueue
		return
	}
	own = append(own, GateVerdict{Gate: GateQueue, Verdict: Open, Reason: q.message})

	// At the head: the group's and the cluster's gates.
	group, wake := groupGates(s, d)
	d.WakeAt = earliest(d.WakeAt, wake)
	d.Gates = append(own, group...)
	if d.Need.Cluster {
		return
	}
	if g := firstClosed(group); g != nil {
		d.hold(g.Gate, g.Reason, false)
		d.reportBlocked(s, spec)
		touch()
		return
	}
	d.Try = q.free
	d.Message = q.message
}

func firstClosed(vs []GateVerdict) *GateVerdict {
	for i := range vs {
		if vs[i].Verdict == Closed {
			return &vs[i]
		}
	}
	return nil
}

// nodeSpecific gates close for one node and not for the others of its
// group: only those make it Blocked, so that the queue passes it. A gate
// closed for the whole group (paused, Kured, the window) keeps the head the
// head: when it opens, the head goes, not every node at once.
func nodeSpecific(gate string) bool {
	switch gate {
	case GateFormat, GateNode, GateHold, GatePolicy, GatePods, GateCommand:
		return true
	}
	return false
}

// hold makes a closed gate the node's message; node-specific gates also
// make it Blocked, so that the queue passes it.
func (d *Decision) hold(gate, reason string, own bool) {
	d.Gate = gate
	d.Message = "waiting: " + reason
	if own {
		d.Blocked = reason
	}
}

// gateOrder is the order in which a Waiting node's gates are checked (and
// listed): its own, the host's command, the queue, then the group's and
// the cluster's, checked by the head of the queue only.
var gateOrder = []string{GatePaused, GateFormat, GateNode, GateHold, GatePolicy, GateKured, GateWindow, GatePods,
	GateCommand, GateQueue, GateSpacing, GateMaxUnavailable, GateWorkloads, GatePrometheus, GateAlertmanager}

// uncheckedFrom lists the gates from first on, in gateOrder, but those in
// skip (decided already), as unchecked.
func uncheckedFrom(first string, skip ...string) []GateVerdict {
	var out []GateVerdict
	for i, g := range gateOrder {
		if i >= slices.Index(gateOrder, first) && !slices.Contains(skip, g) {
			out = append(out, GateVerdict{Gate: g, Verdict: Unchecked})
		}
	}
	return out
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// reportBlocked asks for MaintenanceBlocked once the node has waited past
// health.blockedAfter with a gate closed.
func (d *Decision) reportBlocked(s Snapshot, spec policy.Spec) {
	after := spec.BlockedAfterDuration()
	r := s.Own
	if after <= 0 || r == nil || r.State != lock.Waiting || r.Since.IsZero() || d.Gate == GatePaused {
		return
	}
	since := r.Since.Add(after)
	if s.Now.Before(since) {
		d.WakeAt = earliest(d.WakeAt, since)
		return
	}
	d.Message += fmt.Sprintf(" (blocked since %s)", r.Since.UTC().Format("2006-01-02 15:04 UTC"))
	d.ReportBlocked = !r.BlockedReported
	if d.ReportBlocked {
		d.Effects = Blocked(d.Message)
	}
}

// SettleAfter is how long a waiting agent far from the head of its queue
// lets the cluster's events gather before it decides again: a handoff is
// three of them (the summary, the release, the grant), and the node whose
// turn it is must not wait for a CPU behind every other waiting agent
// deciding that it is still not theirs.
const SettleAfter = 250 * time.Millisecond

// Settle is how long the agent lets the cluster's events gather, after
// one, before it decides again: SettleAfter for a Waiting node behind the
// heads of its queue (only they may take a lock; one per slot) and the
// next in line (which may become a head at the event that moves the
// queue: a blocked head passed, a head withdrew), or behind the first
// names of a queue too long for its summary; 0, at once, for any other.
func (d Decision) Settle() time.Duration {
	behind := d.Position > len(d.Locks)+1 || d.Position == 0 && d.BehindCut
	if d.State != lock.Waiting || !behind {
		return 0
	}
	return SettleAfter
}
