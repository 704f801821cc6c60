package lock

import "time"

// Params of a decision that are configuration.
type Params struct {
	StaleAfter time.Duration // a record without heartbeat for this long is dead
	TTL        time.Duration // 0: locks never expire
	// Owner is the Node the agent's token is bound to, if it is. A lock it
	// takes is then owned by that Node, so the garbage collector deletes the
	// lock when the Node goes, and it never takes over another's lock.
	Owner *NodeRef
}
