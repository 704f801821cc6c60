package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/metrics"
)

// ReasonMaintenanceStuck: the agent's steps failed stuckAfter times in a
// row; it goes on retrying, and says so.
const ReasonMaintenanceStuck = "MaintenanceStuck"

// stuckAfter is how many steps in a row may fail before the agent says,
// where an operator looks, that it is stuck: its record's message (what
// kustodian-ctl status shows), an Event on its Node, its log. The metrics
// count every failed step (kustodian_step_failures).
const stuckAfter = 5

// failing is the run of failed steps the agent is in.
type failing struct {
	count    int
	since    time.Time
	reported bool // the record and the Event say it
}

// stepFailed counts a failed step, and past stuckAfter in a row says so.
func (a *Agent) stepFailed(ctx context.Context, err error) {
	now := a.now()
	if a.failing.count == 0 {
		a.failing.since = now
	}
	a.failing.count++
	count, since := a.failing.count, a.failing.since
	a.updateMetrics(func(d *metrics.Data) { d.StepFailures, d.FailingSince = count, since })
	if count < stuckAfter || a.failing.reported {
		return
	}
	msg := fmt.Sprintf("stuck: %d steps in a row failed since %s; the last: %v", count, since.UTC().Format(time.RFC3339), err)
	a.log.Error("the agent is stuck: its steps keep failing; it goes on retrying", "failures", count, "since", since, "err", err)
	if node := a.cachedNode(); node != nil {
		a.applyEffects(ctx, node.UID, nil, decide.Said(ReasonMaintenanceStuck, true, msg))
	}
	a.failing.reported = a.sayStuck(ctx, msg) == nil
}

// sayStuck writes msg as the message of this node's record, when it has
// one; its next step that succeeds writes its own again.
func (a *Agent) sayStuck(ctx context.Context, msg string) error {
	l := a.myRecordLease()
	if l == nil {
		return nil
	}
	r := lock.RecordFromLease(l)
	r.Message = msg
	r.Heartbeat = a.now()
	return a.records.put(ctx, l, r)
}

// stepSucceeded ends a run of failed steps.
func (a *Agent) stepSucceeded() {
	if a.failing.count == 0 {
		return
	}
	if a.failing.reported {
		a.log.Info("the agent's steps succeed again", "failures", a.failing.count, "since", a.failing.since)
	}
	a.failing = failing{}
	a.updateMetrics(func(d *metrics.Data) { d.StepFailures, d.FailingSince = 0, time.Time{} })
}
