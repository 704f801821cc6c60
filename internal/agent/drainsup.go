package agent

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/drain"
	"github.com/kustodian/kustodian/internal/gates"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/lock/lockapi"
	"github.com/kustodian/kustodian/internal/policy"
)

// drainRun is a drain running in the background.
type drainRun struct {
	request  string
	cancel   context.CancelFunc
	done     chan struct{}
	err      error
	progress string
	// disrupted are the controllers whose pods the drain evicted.
	disrupted []string
}

// overbooked checks, on a fresh read of the policy's locks and the Nodes,
// that taking this node out keeps the policy within maxUnavailable.
func (a *Agent) overbooked(ctx context.Context, p policy.Effective, held []string) (bool, string, error) {
	if p.Spec.Health.MaxUnavailable == nil || len(held) == 0 {
		return false, "", nil
	}
	leases, err := a.locks.all(ctx)
	if err != nil {
		return false, "", err
	}
	nodes, err := gates.Nodes(ctx, a.kube, true, a.policies())
	if err != nil {
		return false, "", err
	}
	over, why := lock.Overbooked(a.node, p, leases, nodes)
	return over, why, nil
}

// recordDisrupted writes on the held locks which controllers lost pods to
// this drain, so that the group's next node waits for them
// (health.workloadsRecovered). A drain that evicted nothing (a second drain
// after a restart) leaves the list as it was.
func (a *Agent) recordDisrupted(ctx context.Context, held []string, disrupted []string) error {
	if len(disrupted) == 0 {
		return nil
	}
	for _, name := range held {
		err := a.locks.setDisrupted(ctx, name, disrupted)
		if errors.Is(err, lockapi.ErrNotHeld) {
			continue
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (a *Agent) draining(ctx context.Context, d decide.Decision, s view) error {
	// The escalation follows the policy as it is now: rules an admin
	// removed mid-drain delete nothing; another policy's, nothing either.
	a.drain.mu.Lock()
	a.drain.escalate = nil
	if d.Policy.Name == a.drain.escalatePolicy {
		a.drain.escalate = d.Policy.Spec.Drain.Escalate
	}
	a.drain.mu.Unlock()
	return a.actOnDrain(ctx, d.Drain, s.Observed(), s.node, s.run)
}

// actOnDrain does a Draining node's step.
func (a *Agent) actOnDrain(ctx context.Context, step decide.DrainStep, o decide.Observed, node *corev1.Node, run *drainRun) error {
	switch step.Do {
	case decide.DrainNoNode:
		return errors.New(step.Why)
	case decide.DrainGiveBack:
		a.stopDrain()
		a.log.Warn(step.Why)
		if step.Publish {
			if err := a.publishStatus(ctx, lock.Draining, o, node, step.Message, step.Status); err != nil {
				return err
			}
		}
		return a.giveBack(ctx, node)
	case decide.DrainRequeue:
		a.clearDrain(run)
		rec := a.myRecord()
		if rec != nil {
			failed := *rec
			failed.Message = step.Why
			rec = &failed
		}
		a.applyEffects(ctx, uidOf(node), rec, step.Effects)
		a.log.Warn(step.Why)
		if err := a.giveBack(ctx, node); err != nil {
			return err
		}
		return a.records.remove(ctx)
	case decide.DrainQuarantine:
		return a.quarantine(ctx, step, o, node, run)
	case decide.DrainHold:
		a.clearDrain(run)
		a.log.Error(step.Why)
		a.failed.request, a.failed.why = o.Request.ID, step.Why
		return a.publish(ctx, lock.Failed, o, node, a.failed.why)
	}
	// Start, Wait and Drained: the cordon stays on (put back if someone
	// took it off).
	if a.decision.Policy.Spec.Autoscaler.Protect {
		if err := a.drain.seam.Protect(ctx, node); err != nil {
			return err
		}
	}
	byAdmin, err := a.drain.seam.Cordon(ctx, node)
	if err != nil {
		return err
	}
	if byAdmin {
		a.log.Info("node was already cordoned by someone else; it stays cordoned after maintenance")
	}
	switch step.Do {
	case decide.DrainStart:
		a.stopDrain() // a drain for an older request
		if err := a.publishStatus(ctx, lock.Draining, o, node, step.Message, step.Status); err != nil {
			return err
		}
		a.drain.mu.Lock()
		a.drain.escalate, a.drain.escalatePolicy, a.drain.nodeUID = a.decision.Policy.Spec.Drain.Escalate, a.decision.Policy.Name, node.UID
		a.drain.mu.Unlock()
		a.startDrain(ctx, o.Request.ID)
		return nil
	case decide.DrainWait:
		return a.publishStatus(ctx, lock.Draining, o, node, step.Message, step.Status)
	}
	a.clearDrain(run)
	if err := a.recordDisrupted(ctx, o.HeldLocks, run.disrupted); err != nil {
		return err
	}
	// Drained: tell the script to go ahead. The in-progress file is created
	// only now that the node is cordoned and every pod that must leave has
	// left, and only while the API server, not the cache, says this node
	// holds its lock: a lock can go while a drain runs (with this host's
	// Node, which owns it), and the cache of an agent whose token died
	// with its Node no longer changes.
	if err := a.confirmHeld(ctx, o.HeldLocks); err != nil {
		return err
	}
	if err := a.files.CreateInProgress(a.node + "\n"); err != nil {
		return permanent(err)
	}
	o.InProgress = true
	a.applyEffects(ctx, uidOf(node), nil, step.Effects)
	return a.inMaintenance(ctx, o, node)
}

// clearDrain forgets the drain that ended, once acted on.
func (a *Agent) clearDrain(run *drainRun) {
	a.drain.mu.Lock()
	defer a.drain.mu.Unlock()
	if a.drain.run == run {
		a.drain.run = nil
	}
}

// confirmHeld asks the API server whether this node still holds one of
// the locks its cache says it holds: one GET per lock, once per
// maintenance.
func (a *Agent) confirmHeld(ctx context.Context, held []string) error {
	for _, name := range held {
		ok, err := a.locks.holds(ctx, name)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("drained, but the API server says this node no longer holds %v: waiting for the watch to show it", held)
}

// drainState is a run as decide.DrainNext sees it.
func (a *Agent) drainState(run *drainRun) *decide.DrainRun {
	s := &decide.DrainRun{Request: run.request}
	select {
	case <-run.done:
		s.Done, s.Err = true, run.err
		s.TimedOut = errors.Is(run.err, drain.ErrTimeout)
	default:
	}
	a.drain.mu.Lock()
	s.Progress = run.progress
	a.drain.mu.Unlock()
	return s
}

func (a *Agent) startDrain(ctx context.Context, request string) {
	dctx, cancel := context.WithCancel(ctx)
	run := &drainRun{request: request, cancel: cancel, done: make(chan struct{})}
	a.drain.mu.Lock()
	a.drain.run = run
	a.drain.mu.Unlock()
	go func() {
		defer close(run.done)
		defer a.poke()
		counted := 0
		run.disrupted, run.err = a.drain.seam.Drain(dctx, a.node, func(p drain.Progress) {
			a.drain.mu.Lock()
			run.progress = p.Message
			a.drain.mu.Unlock()
			a.evictedMetrics(p.Evicted - counted)
			counted = p.Evicted
			a.poke()
		})
	}()
}

// stopDrain cancels a running drain and waits for it to end.
func (a *Agent) stopDrain() {
	a.drain.mu.Lock()
	run := a.drain.run
	a.drain.run = nil
	a.drain.mu.Unlock()
	if run != nil {
		run.cancel()
		<-run.done
	}
}
