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
)

// cleanUp, at Idle, cleans up what a finished cycle may have left: the
// record and the node's state label.
func (a *Agent) cleanUp(ctx context.Context, node *corev1.Node) error {
	// An entry in Kured's lock left by a crash inside giveBack would hold
	// every node back.
	if err := a.releaseKured(ctx); err != nil {
		return err
	}
	a.failed.request, a.failed.why = "", ""
	if node != nil {
		if err := a.unquarantine(ctx, node); err != nil {
			return err
		}
		if err := a.nodes.stateLabel(ctx, node, lock.Idle); err != nil {
			return err
		}
		if err := a.setConditions(ctx, node, lock.Idle, ""); err != nil {
			return err
		}
	}
	from, succeeded := lock.Idle, false
	if l := a.myRecordLease(); l != nil {
		prev := lock.RecordFromLease(l)
		from = prev.State
		if err := a.records.remove(ctx); err != nil {
			return err
		}
		succeeded = prev.State == lock.Completing && !prev.AfterFailure
		a.applyEffects(ctx, uidOf(node), &prev, decide.Transition(prev.State, lock.Idle, prev))
	}
	// A request withdrawn while this node was named in a queue: the
	// summary is made again without it, so that its turn passes at once.
	if err := a.leaveQueues(ctx); err != nil {
		return err
	}
	a.drain.mu.Lock()
	a.drain.escalated, a.drain.quarantined = nil, "" // in the history now
	a.drain.mu.Unlock()
	// The node is back: its silence goes, its alerts count again.
	a.silences.set(lock.Idle, lock.Record{}, node, a.decision.Policy.Spec.Alertmanager)
	a.idleMetrics(from, succeeded)
	a.setStatus("idle: no maintenance requested")
	return nil
}

// released: an admin broke this node's lock. The script must not go on, the
// node stays cordoned, and this request is not queued again.
func (a *Agent) released(ctx context.Context, d decide.Decision, o decide.Observed, node *corev1.Node) error {
	if err := a.releaseKured(ctx); err != nil {
		return err
	}
	if o.InProgress {
		if err := a.files.RemoveInProgress(); err != nil {
			return permanent(err)
		}
	}
	return a.publish(ctx, lock.Failed, o, node, d.Message)
}

func (a *Agent) inMaintenance(ctx context.Context, o decide.Observed, node *corev1.Node) error {
	if node != nil && !node.Spec.Unschedulable {
		// Someone uncordoned the node mid-maintenance: cordon it again.
		if _, err := a.drain.seam.Cordon(ctx, node); err != nil {
			return err
		}
	}
	job, err := a.jobs.store.Current()
	if err != nil {
		return permanent(err)
	}
	if job == nil {
		return a.publish(ctx, lock.InMaintenance, o, node, "in maintenance: waiting for the script to remove "+a.cfg.RequestFile)
	}
	msg, failed, err := a.stepJob(ctx, job, a.rebootPendingAfter(ctx, job, o.RebootPending))
	if err != nil {
		return err
	}
	if failed {
		return a.publish(ctx, lock.Failed, o, node, msg)
	}
	return a.publish(ctx, lock.InMaintenance, o, node, "in maintenance: "+msg)
}

func (a *Agent) completing(ctx context.Context, d decide.Decision, o decide.Observed, node *corev1.Node) error {
	if err := a.publish(ctx, lock.Completing, o, node, d.Message); err != nil {
		return err
	}
	if err := a.files.RemoveInProgress(); err != nil {
		return permanent(err)
	}
	// The maintenance is over: a job that failed is history now, not the
	// job of the next request.
	if err := a.jobs.store.ClearCurrent(); err != nil {
		return permanent(err)
	}
	if err := a.giveBack(ctx, node); err != nil {
		return err
	}
	a.poke() // on to Idle
	return nil
}

// giveBack uncordons the node (unless an admin had cordoned it) and releases
// Kured's lock, then this node's locks: the next node then finds Kured's
// lock free by the time it finds a slot free, and a crash in between leaves
// a lock held, which the next start gives back.
//
// The Node is read from the API server, not the informer's cache: a cache
// that has not yet seen this agent's own cordon (a watch behind, or in its
// backoff after an outage) would say there is nothing to uncordon, and the
// node would stay cordoned. One GET per maintenance.
func (a *Agent) giveBack(ctx context.Context, node *corev1.Node) error {
	if node != nil {
		fresh, err := a.nodes.fresh(ctx)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("reading node %s to uncordon it: %w", node.Name, err)
		default:
			if err := a.drain.seam.Uncordon(ctx, fresh); err != nil && !apierrors.IsNotFound(errors.Unwrap(err)) {
				return err
			}
			if err := a.drain.seam.Unprotect(ctx, fresh); err != nil && !apierrors.IsNotFound(errors.Unwrap(err)) {
				return err
			}
		}
	}
	return a.releaseAll(ctx, node)
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
