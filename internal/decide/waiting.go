package decide

import (
	"fmt"
	"strings"
)

// waiting decides for a Waiting node: its own gates first (a node whose own
// gate is closed is Blocked, and the nodes behind it pass it), then its
// place in the queue, then, only at the head, the group's and the cluster's
// gates, then the locks.
func waiting(s Snapshot, d *Decision) {
	var own []GateVerdict
	closed := func(gate, reason string) { own = append(own, GateVerdict{gate, Closed, reason}) }
	open := func(gate string) { own = append(own, GateVerdict{Gate: gate, Verdict: Open}) }
	spec := d.Policy.Spec

	if s.Paused {
		reason := "maintenance is paused"
		if s.PausedReason != "" {
			reason += ": " + s.PausedReason
		}
		closed(GatePaused, reason)
	} else {
		open(GatePaused)
	}
	if s.Self == nil {
		// A lock taken now would belong to no Node (a node-bound token dies
		// with its Node, and the lock with it).
		closed(GateNode, "this host's Node object does not exist; it may not take the lock until the Node is back")
	} else {
		open(GateNode)
		if s.Self.Held {
			reason := "held by an admin"
			if hold := s.Self.HoldReason; hold != "" && hold != "true" {
				reason += ": " + hold
			}
			closed(GateHold, reason+" (kustodian-ctl resume "+s.Node+")")
		} else {
			open(GateHold)
		}
	}
	if d.Policy.Err != nil {
		closed(GatePolicy, d.Policy.Err.Error())
	} else {
		open(GatePolicy)
	}
	if why := kuredHolds(s); why != "" {
		closed(GateKured, why)
	} else {
		open(GateKured)
	}
	w := d.Policy.Schedule.At(s.Now)
	if !w.Open {
		closed(GateWindow, w.Reason)
	} else {
		open(GateWindow)
	}
	d.WakeAt = earliest(d.WakeAt, w.Change)
	if pods := blockingPods(s, spec); len(pods) > 0 {
		closed(GatePods, "blocked by pod "+strings.Join(pods, ", "))
	} else {
		open(GatePods)
	}

	firstClosed := func(vs []GateVerdict) *GateVerdict {
		for i := range vs {
			if vs[i].Verdict == Closed {
				return &vs[i]
			}
		}
		return nil
	}

	// The group's locks: a lock of another group under this name is a
	// policy to fix.
	for _, name := range d.Locks {
		if l, ok := s.Locks[name]; ok {
			if g := l.Group; l.Grouped && g != d.Group {
				why := fmt.Sprintf("lock %s belongs to group %s, not %s: two policies make the same lock name; rename one of them", name, g, d.Group)
				for i := range own {
					if own[i].Gate == GatePolicy {
						own[i] = GateVerdict{GatePolicy, Closed, why}
					}
				}
				d.Gates = append(own, uncheckedFrom(GateCommand)...)
				d.hold(GatePolicy, why, false)
				return
			}
		}
	}
	q := s.queueOf(d.Group)
	free, holders := freeLocks(s, d, q)
	if len(d.Need.Holders) > 0 {
		return
	}
	queueMsg := q.message(holders)
	d.Position, d.Total = q.position()
	d.BehindCut = q.at < 0 && q.mine < 0 && q.state != nil && q.state.Summary.Cut()
	atHead := q.at >= 0 && q.at < len(free)

	if g := firstClosed(own); g != nil {
		d.Gates = append(own, uncheckedFrom(GateCommand)...)
		d.hold(g.Gate, g.Reason, nodeSpecific(g.Gate))
		reportBlocked(s, d, spec)
		if nodeSpecific(g.Gate) {
			// Its turn passes to the next node, once its record says it
			// is blocked (or the summary made again would name it still).
			if q.at >= 0 && q.at < max(len(free), 1) && s.Own != nil && s.Own.Blocked != "" {
				d.Renominate = "this node heads the queue but is blocked: " + g.Reason
			}
			return
		}
		// A gate closed for the whole group: the head stays the head.
		if !queueUpkeep(s, d, q, free, atHead) {
			touch(s, d, q, free)
		}
		return
	}
	if queueUpkeep(s, d, q, free, atHead) {
		d.Gates = append(own, GateVerdict{GateQueue, Closed, strings.TrimPrefix(queueMsg, "waiting: ")})
		d.Gates = append(d.Gates, uncheckedFrom(GateCommand, GateQueue)...)
		d.Message = queueMsg
		d.Gate = GateQueue
		return
	}

	if s.HasCommand {
		switch {
		case !atHead:
			own = append(own, GateVerdict{Gate: GateCommand, Verdict: Unchecked, Reason: "checked at the head of the queue"})
		case s.Command == nil || s.stale(s.Command.At):
			d.Need.Command = true
			return
		case !s.Command.OK:
			closed(GateCommand, "gate command: "+s.Command.Reason)
		default:
			open(GateCommand)
		}
	} else {
		open(GateCommand)
	}
	if g := firstClosed(own); g != nil {
		d.Gates = append(own, uncheckedFrom(GateQueue)...)
		d.hold(g.Gate, g.Reason, true)
		d.WakeAt = earliest(d.WakeAt, s.Now.Add(s.Params.Poll))
		reportBlocked(s, d, spec)
		if s.Own != nil && s.Own.Blocked != "" {
			d.Renominate = "this node heads the queue but is blocked: " + g.Reason
		}
		return
	}
	if !atHead {
		d.Gates = append(own, GateVerdict{GateQueue, Closed, strings.TrimPrefix(queueMsg, "waiting: ")})
		d.Gates = append(d.Gates, uncheckedFrom(GateSpacing)...)
		d.Message = queueMsg
		d.Gate = GateQueue
		return
	}
	own = append(own, GateVerdict{Gate: GateQueue, Verdict: Open, Reason: queueMsg})

	// At the head: the group's and the cluster's gates.
	group := groupGates(s, d, spec)
	d.Gates = append(own, group...)
	if d.Need.Cluster {
		return
	}
	if g := firstClosed(group); g != nil {
		d.hold(g.Gate, g.Reason, false)
		reportBlocked(s, d, spec)
		touch(s, d, q, free)
		return
	}
	d.Try = free
	d.Message = queueMsg
}
