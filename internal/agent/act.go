package agent

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/lock/lockapi"
	"github.com/kustodian/kustodian/internal/nodemarks"
)

// act carries decision d out, made from s: its steps in order, each
// through the seam it names (decide.Act). It is the maintenance loop's one
// place that changes anything. asked: at Idle, the agent asked for a
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
		case decide.ActEscalation, decide.ActStartDrain:
			a.followEscalation(d, node, st.Do == decide.ActStartDrain)
			if st.Do == decide.ActStartDrain {
				a.startDrain(ctx, o.Request.ID)
			}
		case decide.ActForgetDrain:
			a.clearDrain(s.run)
		case decide.ActHoldFailure:
			a.failed.request, a.failed.why = o.Request.ID, st.Message
		case decide.ActQuarantined:
			a.drain.quarantined = o.Request.ID
		case decide.ActMaintain:
			err = a.maintain(ctx, o, node)
		case decide.ActForget:
			a.forget(d, node, st.State, st.Succeeded)
		case decide.ActAskReboot:
			asked, err = a.requestReboot(ctx, o, node)
		case decide.ActLog:
			a.logStep(st)
		case decide.ActAbort:
			err = errors.New(st.Message)
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
			err = a.releaseAll(ctx, node)
		case decide.ActLeaveQueues:
			err = a.leaveQueues(ctx)
		case decide.ActRenominate:
			a.log.Info("making the queue's summary again", "group", d.Group.String(), "why", st.Message)
			err = a.renominate(ctx, d.Group)
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
			err = a.records.remove(ctx)

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

func (a *Agent) logStep(st decide.Step) {
	var args []any
	if len(st.Pods) > 0 {
		args = append(args, "pods", st.Pods)
	}
	switch st.Level {
	case decide.LevelError:
		a.log.Error(st.Message, args...)
	case decide.LevelWarn:
		a.log.Warn(st.Message, args...)
	default:
		a.log.Info(st.Message, args...)
	}
}

// followEscalation makes the drain follow the policy as it is now: rules
// an admin removed mid-drain delete nothing; another policy's, nothing
// either. A drain that starts takes the policy's rules, its name and the
// Node's UID (for the Events of the pods it deletes).
func (a *Agent) followEscalation(d decide.Decision, node *corev1.Node, starting bool) {
	a.drain.mu.Lock()
	defer a.drain.mu.Unlock()
	if starting {
		a.drain.escalate, a.drain.escalatePolicy, a.drain.nodeUID = d.Policy.Spec.Drain.Escalate, d.Policy.Name, node.UID
		return
	}
	a.drain.escalate = nil
	if d.Policy.Name == a.drain.escalatePolicy {
		a.drain.escalate = d.Policy.Spec.Drain.Escalate
	}
}

// forget, at Idle, forgets what the cycle that ended left in memory (a
// failed drain, the pods deleted past their budget: in the history now),
// takes the node's silence away (its alerts count again), and reports
// Idle: from the state the record was in, succeeded when a maintenance
// that succeeded ended.
func (a *Agent) forget(d decide.Decision, node *corev1.Node, from lock.State, succeeded bool) {
	a.failed.request, a.failed.why = "", ""
	a.drain.mu.Lock()
	a.drain.escalated, a.drain.quarantined = nil, ""
	a.drain.mu.Unlock()
	a.silences.set(lock.Idle, lock.Record{}, node, d.Policy.Spec.Alertmanager)
	a.idleMetrics(from, succeeded)
	a.setStatus("idle: no maintenance requested")
}

// take tries the locks in turn; with the one it takes it holds Kured's
// lock, or gives the lock back when Kured took its own meanwhile. taken:
// a lock was taken and kept.
func (a *Agent) take(ctx context.Context, d decide.Decision, try []string) (bool, error) {
	params := lock.Params{StaleAfter: a.cfg.Queue.StaleAfter(), TTL: a.cfg.Lock.TTL, Owner: a.owner}
	for _, name := range try {
		taken, v, err := a.locks.acquire(ctx, name, d.Group, params, a.holderFacts)
		if err != nil {
			return false, err
		}
		if !taken {
			a.log.Debug("lock not acquired", "lock", name, "why", v.Why)
			continue
		}
		if ok, why, err := a.holdKured(ctx); err != nil || !ok {
			// Kured took its lock meanwhile: give ours back and wait.
			if rerr := a.locks.release(ctx, name); rerr != nil {
				return false, rerr
			}
			if err != nil {
				return false, err
			}
			a.log.Info("Kured's lock is taken; gave the lock back", "why", why)
			return true, nil // nothing more this step
		}
		a.log.Info("lock acquired", "lock", name, "group", d.Group.String(), "note", v.Why)
		a.poke() // go on to Draining at once
		return true, nil
	}
	return false, nil
}

// releaseAll releases Kured's lock, then this node's locks (naming the
// next nodes of their queues first).
func (a *Agent) releaseAll(ctx context.Context, node *corev1.Node) error {
	if err := a.releaseKured(ctx); err != nil {
		return err
	}
	held := a.heldLocks()
	if err := a.locks.handOff(ctx); err != nil {
		return err
	}
	for _, name := range held {
		if node != nil {
			a.applyEffects(ctx, uidOf(node), nil, decide.Said(decide.ReasonLockReleased, false, "released lock "+name))
		}
		a.log.Info("lock released", "lock", name)
	}
	return nil
}

// leaveQueues makes again the summaries that still name this node, which
// has no request any more.
func (a *Agent) leaveQueues(ctx context.Context) error {
	if err := a.locks.leaveQueues(ctx); err != nil {
		return err
	}
	a.queue.mine = nil
	return nil
}

// renominate makes group's summary from one LIST and writes it; what it
// made is this node's own view of the queue from then on.
func (a *Agent) renominate(ctx context.Context, group lock.GroupRef) error {
	mine, err := a.locks.renominate(ctx, group)
	if err != nil {
		return err
	}
	a.queue.mine, a.queue.mineGroup = &mine, group
	a.poke()
	return nil
}

// renewLocks keeps locks with a TTL from expiring while this node holds
// them: once a heartbeat.
func (a *Agent) renewLocks(ctx context.Context, held []string) error {
	if a.cfg.Lock.TTL == 0 || len(held) == 0 || a.now().Sub(a.locks.lastRenew) < a.cfg.Queue.Heartbeat*9/10 {
		return nil
	}
	for _, name := range held {
		err := a.locks.renew(ctx, name)
		if errors.Is(err, lockapi.ErrNotHeld) {
			a.log.Warn("lost the lock: it expired and another node took it", "lock", name)
			a.poke()
			continue
		}
		if err != nil {
			return err
		}
	}
	a.locks.lastRenew = a.now()
	return nil
}

// cordon puts the cordon on (again, if someone took it off).
func (a *Agent) cordon(ctx context.Context, node *corev1.Node) error {
	byAdmin, err := a.drain.seam.Cordon(ctx, node)
	if err == nil && byAdmin {
		a.log.Info("node was already cordoned by someone else; it stays cordoned after maintenance")
	}
	return err
}

// uncordon takes the cordon off (unless an admin had cordoned it) and the
// autoscaler's mark. The Node is read from the API server, not the
// informer's cache: a cache that has not yet seen this agent's own cordon
// (a watch behind, or in its backoff after an outage) would say there is
// nothing to uncordon, and the node would stay cordoned. One GET per
// maintenance.
func (a *Agent) uncordon(ctx context.Context, node *corev1.Node) error {
	fresh, err := a.nodes.fresh(ctx)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading node %s to uncordon it: %w", node.Name, err)
	}
	if err := a.drain.seam.Uncordon(ctx, fresh); err != nil && !apierrors.IsNotFound(errors.Unwrap(err)) {
		return err
	}
	if err := a.drain.seam.Unprotect(ctx, fresh); err != nil && !apierrors.IsNotFound(errors.Unwrap(err)) {
		return err
	}
	return nil
}

// showState writes the node's state label and its conditions.
func (a *Agent) showState(ctx context.Context, node *corev1.Node, state lock.State, message string) error {
	if err := a.nodes.stateLabel(ctx, node, state); err != nil {
		return err
	}
	return a.setConditions(ctx, node, state, message)
}
