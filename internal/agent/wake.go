package agent

import (
	"context"
	"time"

	"github.com/kustodian/kustodian/internal/lock"
)

func (a *Agent) poke() {
	select {
	case a.signals.wake <- struct{}{}:
	default:
	}
}

// settleAfter is how long a waiting agent behind the heads of its queue
// (the first nodes, one per slot) and the next in line lets the cluster's
// events gather before it decides again: a handoff is
// three of them (the summary, the release, the grant), and the node whose
// turn it is must not wait for a CPU behind every other waiting agent
// deciding that it is still not theirs.
const settleAfter = 250 * time.Millisecond

// settle waits settleAfter after a cluster event when this node waits
// behind the heads (only they may take a lock) and the next in line (which
// may become a head at the event that moves the queue: a blocked head
// passed, a head withdrew), or behind the first names of a queue too long
// for its summary, and takes the events that came
// meanwhile with it. A file or job change, or the end, cuts it short.
func (a *Agent) settle(ctx context.Context, fileChanges, jobChanges <-chan struct{}) {
	d := a.decision
	behind := d.Position > len(d.Locks)+1 || d.Position == 0 && d.BehindCut
	if d.State != lock.Waiting || !behind {
		return
	}
	t := a.clock.NewTimer(settleAfter)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C():
	case <-fileChanges:
	case <-jobChanges:
	}
	select {
	case <-a.signals.wake:
	default:
	}
}

// untilWake is how long until the last decision wants to be made again (a
// window edge, the end of spacing, the next poll of the gates, a managed
// job's retry, a rollout's soak).
func (a *Agent) untilWake() time.Duration {
	wake := a.decision.WakeAt
	for _, w := range []time.Time{a.jobs.wakeAt, a.rollouts.wakeAt} {
		if !w.IsZero() && (wake.IsZero() || w.Before(wake)) {
			wake = w
		}
	}
	if wake.IsZero() {
		return time.Hour
	}
	return max(wake.Sub(a.now()), 10*time.Millisecond)
}
