package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/nodemarks"
)

// Acting on a decision: each of its steps (decide.Step) through the seam
// it names, in the order decide gave them.

// act carries decision d out, made from s: its steps in order, each
// through the seam it names (decide.Act). Besides Kured's lock, which a
// Draining node's look-ups take, nothing else in the maintenance loop
// changes anything. asked: at Idle, the agent asked for a
// maintenance of its own (a reboot the host needs), which it goes on with.
func (a *Agent) act(ctx context.Context, d decide.Decision, s view) (asked bool, err error) {
	o, node := s.Observed(), s.node
	taken := false
	for _, st := range d.Steps {
		if st.NoneTaken && taken {
			continue
		}
		switch st.Do {
		// The host, and what the agent keeps in memory.
		case decide.ActStopDrain:
			a.stopDrain()
		case decide.ActInhibit:
			a.inhibitFor(ctx, st.State)
		case decide.ActRemoveInProgress:
			err = permanentIf(a.files.RemoveInProgress())
		case decide.ActCreateInProgress:
			err = permanentIf(a.files.CreateInProgress(a.node + "\n"))
			o.InProgress = err == nil
		case decide.ActClearJob:
			err = permanentIf(a.jobs.store.ClearCurrent())
		case decide.ActEscalation:
			a.followEscalation(d, node, false)
		case decide.ActStartDrain:
			a.followEscalation(d, node, true)
			a.startDrain(ctx, o.Request.ID)
		case decide.ActForgetDrain:
			a.clearDrain(s.run)
		case decide.ActHoldFailure:
			a.failed.request, a.failed.why = o.Request.ID, st.Message
		case decide.ActQuarantined:
			a.drain.quarantined = o.Request.ID
		case decide.ActJob:
			err = a.doJob(ctx, o, node, st.Job)
		case decide.ActForget:
			// What the cycle that ended left in memory goes (a failed
			// drain, the pods deleted past their budget: in the history
			// now); the node's silence goes, its alerts count again.
			a.failed.request, a.failed.why = "", ""
			a.drain.forgetCycle()
			a.silences.set(lock.Idle, lock.Record{}, node, d.Policy.Spec.Alertmanager)
			a.idleMetrics(st.State, st.Succeeded)
			a.setStatus("idle: no maintenance requested")
		case decide.ActAskReboot:
			asked, err = a.requestReboot(ctx, o, node)
		case decide.ActLog:
			log := a.log.Info
			switch st.Level {
			case decide.LevelError:
				log = a.log.Error
			case decide.LevelWarn:
				log = a.log.Warn
			}
			if len(st.Pods) > 0 {
				log(st.Message, "pods", st.Pods)
			} else {
				log(st.Message)
			}
		case decide.ActAbort:
			err = st.Err
			if err == nil {
				err = errors.New(st.Message)
			}
		case decide.ActPoke:
			a.poke()

		// The locks.
		case decide.ActRenew:
			err = a.renewLocks(ctx, st.Locks)
		case decide.ActTake:
			taken, err = a.take(ctx, d, st.Locks)
		case decide.ActReleaseKured:
			err = a.releaseKured(ctx)
		case decide.ActReleaseAll:
			err = a.releaseAll(ctx, st.Locks)
		case decide.ActLeaveQueues:
			err = a.leaveQueues(ctx)
		case decide.ActRenominate:
			a.log.Info("making the queue's summary again", "group", d.Group.String(), "why", st.Message)
			err = a.renominate(ctx, d.Group, st.Claim)
		case decide.ActTouch:
			err = a.locks.touch(ctx, d.Group)
		case decide.ActSetDisrupted:
			err = a.recordDisrupted(ctx, st.Locks, st.Controllers)
		case decide.ActConfirmHeld:
			err = a.confirmHeld(ctx, st.Locks)

		// The node's record.
		case decide.ActPublish:
			err = a.publishStatus(ctx, st.State, o, node, st.Message, st.Status)
		case decide.ActRemoveRecord:
			// The record's MaintenanceRequest is Completed first: the
			// node is given back, and the record names the request.
			if s.Own != nil {
				err = a.reportRequest(ctx, lock.Idle, *s.Own)
			}
			if err == nil {
				err = a.records.remove(ctx)
			}

		// The Node.
		case decide.ActProtect:
			err = a.drain.seam.Protect(ctx, node)
		case decide.ActCordon:
			err = a.cordon(ctx, node)
		case decide.ActUncordon:
			err = a.uncordon(ctx, node)
		case decide.ActMarkQuarantine:
			err = a.nodes.annotate(ctx, nodemarks.AnnotationQuarantined, &d.Policy.Name)
		case decide.ActUnquarantine:
			err = a.unquarantine(ctx, node)
		case decide.ActShowState:
			err = a.showState(ctx, node, st.State, st.Message)

		// What the step makes known.
		case decide.ActTell:
			a.applyEffects(ctx, uidOf(node), st.About, st.Effects)
		default:
			err = fmt.Errorf("unknown step %d in state %s", st.Do, d.State)
		}
		if err != nil {
			return asked, err
		}
	}
	return asked, nil
}

// permanentIf marks a host file's failure as permanent.
func permanentIf(err error) error {
	if err != nil {
		return permanent(err)
	}
	return nil
}
