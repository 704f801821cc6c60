package agent

import (
	"context"
	"time"
)

func (a *Agent) poke() {
	select {
	case a.signals.wake <- struct{}{}:
	default:
	}
}

// settle waits after a cluster event as long as the last decision says
// (decide.Decision.Settle), and takes the events that came meanwhile with
// it. A file or job change, or the end, cuts it short.
func (a *Agent) settle(ctx context.Context, fileChanges, jobChanges <-chan struct{}) {
	wait := a.decision.Settle()
	if wait == 0 {
		return
	}
	t := a.clock.NewTimer(wait)
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
// job's retry, a rollout's soak, the record's renewal far back in a queue,
// the next look of a node asleep far back).
func (a *Agent) untilWake() time.Duration {
	wake := a.decision.WakeAt
	for _, w := range []time.Time{a.jobs.wakeAt, a.rollouts.wakeAt, a.queue.renewAt, a.queue.far.listAt, a.reported.request.wakeAt} {
		if !w.IsZero() && (wake.IsZero() || w.Before(wake)) {
			wake = w
		}
	}
	if wake.IsZero() {
		return time.Hour
	}
	return max(wake.Sub(a.now()), 10*time.Millisecond)
}
