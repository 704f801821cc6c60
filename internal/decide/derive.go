package decide

import (
	"github.com/kustodian/kustodian/internal/hostfiles"
	"github.com/kustodian/kustodian/internal/lock"
)

// Observed is everything the state is derived from (docs/design.md, "States"). The
// agent keeps no other state that matters across a restart.
type Observed struct {
	Request       *hostfiles.Request // nil: no request
	InProgress    bool
	RebootPending bool
	HeldLocks     []string // lock Leases of this node's group that name this node
	CordonedByUs  bool
	// FailedRequest is the request whose drain failed in this run of the
	// agent with drain.onTimeout=hold; a restart drains again.
	FailedRequest string
	// ReleasedRequest is the request whose lock an admin released
	// (kustodian-ctl release): it is not queued again.
	ReleasedRequest string
}

// Released reports whether an admin released the lock of the current request.
func (o Observed) Released() bool {
	return o.Request != nil && o.ReleasedRequest != "" && (o.ReleasedRequest == o.Request.ID || o.ReleasedRequest == "*")
}

// Derive maps an observation to the state the agent must be in.
func Derive(o Observed) lock.State {
	held := len(o.HeldLocks) > 0
	switch {
	case o.Request == nil && (o.InProgress || held || o.CordonedByUs):
		return lock.Completing
	case o.Request == nil:
		return lock.Idle
	case !held && o.Released():
		return lock.Failed
	case !held:
		return lock.Waiting
	case o.InProgress:
		return lock.InMaintenance
	case o.FailedRequest != "" && o.FailedRequest == o.Request.ID:
		return lock.Failed
	default:
		return lock.Draining
	}
}
