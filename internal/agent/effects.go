package agent

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/kustodian/kustodian/internal/history"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/notify"
)

// effect is one side effect of a change of a node's published state: an
// Event on its Node, a notification, an entry in its history.
type effect struct {
	event   string // the Event's reason; "" for none
	warning bool   // a Warning Event, not a Normal one
	message string // the Event's or the notification's text; "" for the record's message
	notify  notify.Event
	history string // the history entry's result; "" for none
}

// completedMessage is said when a node is back after a maintenance that
// succeeded.
const completedMessage = "maintenance completed; node is back in the cluster"

// effectsOf are the side effects of a node's record going from one state
// to another (r is the record of the state it goes to; for Idle, the last
// one it had). They are declared here once per transition, and carried
// out by applyEffects, wherever the transition happens.
func effectsOf(from, to lock.State, r lock.Record) []effect {
	switch to {
	case lock.Waiting:
		if from == "" || from == lock.Idle {
			msg := "maintenance requested"
			if r.Reason != "" {
				msg += ": " + r.Reason
			}
			return []effect{{event: ReasonMaintenanceRequested, message: msg}}
		}
	case lock.Draining:
		out := []effect{{event: ReasonLockAcquired, message: "acquired the maintenance lock; cordoning and draining"}}
		if from == lock.Waiting {
			out = append(out, effect{notify: notify.Started})
		}
		return out
	case lock.InMaintenance:
		return []effect{{event: ReasonMaintenanceStarted, message: "the maintenance script may proceed"}}
	case lock.Rebooting:
		return []effect{{event: ReasonRebooting, message: "the host is rebooting; the lock stays held"}}
	case lock.Completing:
		if from != lock.Failed { // a repaired failure is in the history already
			return []effect{{history: history.Succeeded}}
		}
	case lock.Failed:
		// Every way in: a failed drain, a failed job, an admin's release.
		return []effect{{event: ReasonMaintenanceFailed, warning: true}, {notify: notify.Failed}, {history: history.Failed}}
	case lock.Idle:
		if from == lock.Completing && !r.AfterFailure {
			return []effect{{event: ReasonMaintenanceCompleted, message: completedMessage}, {notify: notify.Completed, message: completedMessage}}
		}
	}
	return nil
}

// applyEffects carries out the effects of a transition for the node's
// record r; node nil (its Node is gone) takes no Event and no history.
func (a *Agent) applyEffects(ctx context.Context, node *corev1.Node, r lock.Record, effects []effect) {
	for _, e := range effects {
		switch {
		case e.event != "" && node != nil:
			typ, msg := corev1.EventTypeNormal, e.message
			if e.warning {
				typ = corev1.EventTypeWarning
			}
			if msg == "" {
				msg = r.Message
			}
			a.event(ctx, node.UID, typ, e.event, msg)
		case e.notify != "":
			a.tell(e.notify, r, e.message)
		case e.history != "" && node != nil:
			a.remember(ctx, node, r, e.history)
		}
	}
}
