package agent

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/lock"
)

// publish writes the node record (when something changed, or a heartbeat is
// due), the node's state label, the Events of a transition, and STATUS.
func (a *Agent) publish(ctx context.Context, state lock.State, o decide.Observed, node *corev1.Node, message string) error {
	return a.publishStatus(ctx, state, o, node, message, "")
}

// publishStatus is publish with the host's status line said apart from
// the record's message ("": the message).
func (a *Agent) publishStatus(ctx context.Context, state lock.State, o decide.Observed, node *corev1.Node, message, status string) error {
	now := a.now()
	base := a.myRecordLease()
	var stored *lock.Record
	if base != nil {
		prev := lock.RecordFromLease(base)
		stored = &prev
	}
	r, from := decide.NextRecord(stored, decide.RecordIn{Node: a.node, State: state, Message: message, Group: a.decision.Group,
		Priority: priority(node), Request: o.Request, Quarantined: a.drain.quarantined, Silence: a.silences.status(),
		Decision: a.decision, Now: now})
	cadence := decide.RecordHeartbeat(a.cfg.Queue.Heartbeat, a.queue.nearBand, a.decision)
	written := decide.WriteRecord(stored, r, now, cadence)
	if written {
		// A new record has no QueueKey: until the next write stores it, the
		// record's own resourceVersion, that of its creation, stands for it.
		if err := a.records.put(ctx, base, r); err != nil {
			return err
		}
		if stored != nil && stored.OwnGateClosed() && !r.OwnGateClosed() {
			a.queue.mine = nil // made while it was blocked, so without it
		}
	}
	// A node far back renews on time, not at the heartbeat's tick after
	// (which would stretch the gap to nearly three heartbeats).
	a.queue.renewAt = time.Time{}
	if cadence > a.cfg.Queue.Heartbeat {
		last := now
		if !written && stored != nil {
			last = stored.Heartbeat
		}
		a.queue.renewAt = last.Add(cadence * 9 / 10)
	}
	// The record is written: what a transition sets off (Events,
	// notifications, the history, the metrics) happens now, whatever
	// becomes of the label, which the next step writes again.
	if from != state {
		a.applyEffects(ctx, uidOf(node), &r, decide.Transition(from, state, r))
	}
	a.transitionMetrics(orIdle(from), state, r, o, now)
	if from != state {
		a.log.Info("state", "from", orIdle(from), "to", state, "message", message)
	}
	a.setStatus(a.statusLine(state, r, status))
	if node != nil {
		a.warnToken(ctx, node)
		if err := a.nodes.stateLabel(ctx, node, state); err != nil {
			return err
		}
		if err := a.setConditions(ctx, node, state, message); err != nil {
			return err
		}
	}
	if err := a.reportRequest(ctx, state, r); err != nil {
		a.log.Warn("cannot write the status of the MaintenanceRequest; again at the next step", "err", err)
	}
	a.silences.set(state, r, node, a.decision.Policy.Spec.Alertmanager)
	return nil
}

// priority is the Node's kustodian.io/priority, set by an admin (higher
// goes first); 0 when absent or not a number.
func priority(node *corev1.Node) int {
	if node == nil {
		return 0
	}
	p, err := strconv.Atoi(node.Annotations[lock.AnnotationPriority])
	if err != nil {
		return 0
	}
	return p
}

func orIdle(s lock.State) lock.State {
	if s == "" {
		return lock.Idle
	}
	return s
}

// statusLine is systemd's STATUS: "waiting: position 3 of 7", "draining: 4
// pods left", "in maintenance for 5m"; status, when set, is the step's own.
func (a *Agent) statusLine(state lock.State, r lock.Record, status string) string {
	line := r.Message
	switch {
	case status != "":
		line = status
	case state == lock.InMaintenance:
		line = fmt.Sprintf("in maintenance for %s", a.now().Sub(r.Since).Round(time.Second))
	}
	if _, w := a.tokenWarning(); w != "" {
		line += " (" + w + ")"
	}
	return line
}

func (a *Agent) setStatus(line string) {
	if a.reported.hostWarning != "" {
		line += " (" + a.reported.hostWarning + ")"
	}
	if line == a.reported.status {
		return
	}
	a.reported.status = line
	a.notify.Status(line)
}
