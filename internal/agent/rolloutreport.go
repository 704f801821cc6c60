package agent

import (
	"context"
	"errors"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/jobs"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/rollout"
)

// entryOf is what this node's entry says of its rollout job.
func entryOf(j *jobs.Job, current bool, now time.Time) rollout.NodeStatus {
	e := rollout.NodeStatus{Attempts: j.Attempts, Message: j.Summary()}
	final := func(state string) {
		e.State = state
		e.LastLines = j.LastLines
		if j.RollbackExitCode != nil && *j.RollbackExitCode != 0 {
			e.LastLines = j.RollbackLastLines
		}
		e.LastLines = lastN(e.LastLines, 10)
		finished := j.Finished
		if finished.IsZero() {
			finished = now
		}
		t := metav1.NewTime(finished)
		e.Finished = &t
	}
	switch j.State {
	case jobs.Pending:
		e.State = rollout.Waiting
	case jobs.Running, jobs.Rebooting:
		e.State = rollout.Running
	case jobs.Succeeded:
		// Succeeded for good once the agent ended the job (it is no longer
		// the current one): until then a reboot may follow.
		if current {
			e.State = rollout.Running
		} else {
			final(rollout.Succeeded)
		}
	case jobs.RollingBack:
		e.State = rollout.RollingBack
	case jobs.Retrying:
		e.State = rollout.Retrying
	case jobs.Failed, jobs.RolledBack, jobs.RollbackFailed:
		switch {
		case !j.Held() && j.State == jobs.Failed && len(j.Rollback) > 0:
			e.State = rollout.RollingBack
		case !j.Held():
			e.State = rollout.Retrying
		case j.State == jobs.RolledBack:
			final(rollout.RolledBack)
		default:
			final(rollout.Failed)
		}
	}
	return e
}

func lastN(lines []string, n int) []string {
	if len(lines) > n {
		return lines[len(lines)-n:]
	}
	return lines
}

// reportRollout writes this node's entry of r when its job's state says
// something new, and withdraws a job not started yet when r stopped.
func (ro *rollouter) reportRollout(ctx context.Context, c cachedRollout, nodes []rollout.NodeFacts, state lock.State) error {
	r := c.r
	rev := rollout.Revision(r.Namespace, r.Name, r.Spec)
	j, err := ro.jobs.Get(rolloutJobID(r.Name, rev))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return permanent(err)
	}
	cur, err := ro.jobs.Current()
	if err != nil {
		return permanent(err)
	}
	current := cur != nil && cur.ID == j.ID
	want := entryOf(j, current, ro.now())
	if why := rollout.Withdrawn(r, nodes); why != "" && want.State == rollout.Waiting && current && (state == lock.Waiting || state == lock.Idle || state == lock.Draining) {
		// Queued, or draining for it, not started: it goes, and the node
		// leaves the queue or gives its lock back.
		if err := ro.jobs.Discard(j.ID); err != nil {
			return permanent(err)
		}
		if err := ro.files.RemoveRequest(); err != nil {
			return permanent(err)
		}
		ro.log.Info("withdrew a queued rollout", "rollout", r.Name, "revision", rev, "why", why)
		want.State, want.Message = rollout.Cancelled, "withdrawn before it started: "+why
		ro.poke()
	}
	old := r.Entry(ro.node)
	want.Name, want.Revision = ro.node, rev
	set, err := patchReport(r, ro.node, j.Dir, &want, metav1.NewTime(ro.now()))
	if err != nil {
		// The entry is written without what the job changed: the job's
		// directory still has it.
		ro.log.Warn("could not read what a patch job changed", "rollout", r.Name, "job", j.ID, "err", err)
	}
	if old != nil && old.Revision == rev {
		want.Stage, want.Started = old.Stage, old.Started
		if old.State == want.State && old.Message == want.Message && old.Attempts == want.Attempts && set == nil {
			return nil
		}
	}
	return ro.writeEntry(ctx, c, want, nodes, false, set)
}

// withdrawOrphan withdraws a rollout's job that has not started when its
// rollout is gone (deleted) or runs another revision now (its script
// changed): what an admin took back must not run later.
func (ro *rollouter) withdrawOrphan(rs []cachedRollout, state lock.State) error {
	if state != lock.Waiting && state != lock.Idle {
		return nil
	}
	cur, err := ro.jobs.Current()
	if err != nil {
		return permanent(err)
	}
	if cur == nil || cur.Rollout == nil || cur.State != jobs.Pending {
		return nil
	}
	why := "its rollout was deleted"
	for _, c := range rs {
		if c.r.Name == cur.Rollout.Name && string(c.r.UID) == cur.Rollout.UID {
			rev := rollout.Revision(c.r.Namespace, c.r.Name, c.r.Spec)
			if rev == cur.Rollout.Revision {
				return nil
			}
			why = "its rollout runs revision " + rev + " now"
		}
	}
	if err := ro.jobs.Discard(cur.ID); err != nil {
		return permanent(err)
	}
	if err := ro.files.RemoveRequest(); err != nil {
		return permanent(err)
	}
	ro.log.Info("withdrew a queued rollout job", "job", cur.ID, "why", why)
	ro.poke()
	return nil
}

// recheckRefusals is how often a host checks a rollout it refused again
// when its spec did not change: its ConfigMap, or this host's trusted
// keys, may have been fixed since.
const recheckRefusals = 5 * time.Minute

// checkAgain says whether a rollout this host refused is checked again:
// its spec changed since (a new signature, say), or the refusal is older
// than recheckRefusals.
func (ro *rollouter) checkAgain(r *rollout.MaintenanceRollout, e *rollout.NodeStatus) bool {
	if e.State != rollout.Refused {
		return false
	}
	if e.ObservedGeneration != r.Generation {
		return true
	}
	last, ok := ro.refusedAt[r.Name]
	if !ok && e.Finished != nil {
		last = e.Finished.Time
	}
	return ro.now().Sub(last) >= recheckRefusals
}
