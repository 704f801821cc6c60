package decide

import (
	"github.com/kustodian/kustodian/internal/lock"
)

// The reasons of the Events a maintenance puts on its node's Node
// (docs/agent.md, "Cluster objects").
const (
	ReasonMaintenanceRequested = "MaintenanceRequested"
	ReasonLockAcquired         = "LockAcquired"
	ReasonDrained              = "Drained"
	ReasonMaintenanceStarted   = "MaintenanceStarted"
	ReasonRebooting            = "Rebooting"
	ReasonMaintenanceCompleted = "MaintenanceCompleted"
	ReasonMaintenanceFailed    = "MaintenanceFailed"
	ReasonLockReleased         = "LockReleased"
	// ReasonMaintenanceBlocked: a node waited past its policy's
	// health.blockedAfter with a gate closed.
	ReasonMaintenanceBlocked = "MaintenanceBlocked"
	// ReasonQuarantined: a drain timed out and the policy quarantines.
	ReasonQuarantined = "Quarantined"
)

// The notifications a maintenance sends (the events of internal/notify).
const (
	NotifyStarted   = "started"
	NotifyCompleted = "completed"
	NotifyFailed    = "failed"
	NotifyBlocked   = "blocked"
)

// The results of the entries of a node's history (internal/history).
const (
	HistorySucceeded = "succeeded"
	HistoryFailed    = "failed"
)

// Effect is one side effect of the maintenance loop for a node: an Event
// on its Node, a notification, or an entry in its history. The agent
// carries out the effects its decisions give, and sends no Event or
// notification of the maintenance otherwise.
type Effect struct {
	Event   string // the Event's reason; "" for none
	Warning bool   // a Warning Event, not a Normal one
	Message string // the Event's or the notification's text; "" for the record's message
	Pod     string // the Event is on this pod ("namespace/name"), not on the Node
	Notify  string // the notification; "" for none
	History string // the history entry's result; "" for none
}

// CompletedMessage is said when a node is back after a maintenance that
// succeeded.
const CompletedMessage = "maintenance completed; node is back in the cluster"

// Transition is what a node's record going from one state to another
// makes known (r is the record of the state it goes to; for Idle, the
// last one it had): declared here once per transition, whichever step
// makes it.
func Transition(from, to lock.State, r lock.Record) []Effect {
	switch to {
	case lock.Waiting:
		if from == "" || from == lock.Idle {
			msg := "maintenance requested"
			if r.Reason != "" {
				msg += ": " + r.Reason
			}
			return []Effect{{Event: ReasonMaintenanceRequested, Message: msg}}
		}
	case lock.Draining:
		out := []Effect{{Event: ReasonLockAcquired, Message: "acquired the maintenance lock; cordoning and draining"}}
		if from == lock.Waiting {
			out = append(out, Effect{Notify: NotifyStarted})
		}
		return out
	case lock.InMaintenance:
		return []Effect{{Event: ReasonMaintenanceStarted, Message: "the maintenance script may proceed"}}
	case lock.Rebooting:
		return []Effect{{Event: ReasonRebooting, Message: "the host is rebooting; the lock stays held"}}
	case lock.Completing:
		if from != lock.Failed { // a repaired failure is in the history already
			return []Effect{{History: HistorySucceeded}}
		}
	case lock.Failed:
		// Every way in: a failed drain, a failed job, an admin's release.
		return Failure("")
	case lock.Idle:
		if from == lock.Completing && !r.AfterFailure {
			return []Effect{{Event: ReasonMaintenanceCompleted, Message: CompletedMessage}, {Notify: NotifyCompleted, Message: CompletedMessage}}
		}
	}
	return nil
}

// Failure is what a maintenance that failed makes known: a Warning Event,
// the failed notification and a failed entry in the history, saying why
// ("": the record's message).
func Failure(why string) []Effect {
	return []Effect{{Event: ReasonMaintenanceFailed, Warning: true, Message: why}, {Notify: NotifyFailed, Message: why}, {History: HistoryFailed}}
}

// Blocked is what a node that waited past its policy's
// health.blockedAfter makes known, once.
func Blocked(why string) []Effect {
	return []Effect{{Event: ReasonMaintenanceBlocked, Warning: true, Message: why}, {Notify: NotifyBlocked, Message: why}}
}

// Said is an Event alone: what a step makes known that changes no state
// (a lock given back, a drain done, a quarantine).
func Said(reason string, warning bool, message string) []Effect {
	return []Effect{{Event: reason, Warning: warning, Message: message}}
}
