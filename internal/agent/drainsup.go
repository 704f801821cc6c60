package agent

import (
	"context"
	"errors"
	"fmt"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/drain"
	"github.com/kustodian/kustodian/internal/gates"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/lock/lockapi"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
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

// drainRunning reports whether a drain is running.
func (a *Agent) drainRunning() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.drain != nil
}

// overbooked checks, on a fresh read of the policy's locks and the Nodes,
// that taking this node out keeps the policy within maxUnavailable.
func (a *Agent) overbooked(ctx context.Context, held []string) (bool, string, error) {
	p := a.decision.Policy
	if p.Spec.Health.MaxUnavailable == nil || len(held) == 0 {
		return false, "", nil
	}
	locks, err := a.locks.Locks(ctx)
	if err != nil {
		return false, "", err
	}
	leases := make([]*coordv1.Lease, len(locks))
	for i := range locks {
		leases[i] = &locks[i]
	}
	nodes, err := gates.Nodes(ctx, a.kube, true)
	if err != nil {
		return false, "", err
	}
	over, why := lock.Overbooked(a.node, p, a.policies(), leases, nodes)
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
		l, err := a.locks.SetDisrupted(ctx, name, a.node, disrupted)
		if errors.Is(err, lockapi.ErrNotHeld) {
			continue
		}
		if err != nil {
			return err
		}
		a.leases.Wrote(l)
	}
	return nil
}

func (a *Agent) draining(ctx context.Context, o decide.Observed, node *corev1.Node) error {
	if node == nil {
		// Keep the lock: the host is alive, and the Node may come back.
		return fmt.Errorf("node %s does not exist, but this host holds the lock; waiting for the Node to return", a.node)
	}
	if ok, why, err := a.holdKured(ctx); err != nil {
		return err
	} else if !ok {
		// No drain without Kured's lock (docs/agent.md). Kured took it
		// (between this node's grant and now, or while the agent was
		// down): give the node back and wait for Kured's reboot to end.
		a.stopDrain()
		a.log.Warn("Kured's lock is taken; giving the node back and waiting", "why", why)
		if err := a.publish(ctx, lock.Draining, o, node, "giving the node back: "+why); err != nil {
			return err
		}
		return a.giveBack(ctx, node)
	}
	if !o.CordonedByUs && !a.drainRunning() {
		// Heads of two groups may have found room under maxUnavailable in
		// the same instant: the later one gives its lock back.
		if over, why, err := a.overbooked(ctx, o.HeldLocks); err != nil {
			return err
		} else if over {
			// Still Waiting in its record: it never left the cluster.
			a.log.Info("giving the lock back: the policy's maxUnavailable is reached", "why", why)
			return a.giveBack(ctx, node)
		}
	}
	if a.decision.Policy.Spec.Autoscaler.Protect {
		if err := a.drainer.Protect(ctx, node); err != nil {
			return err
		}
	}
	byAdmin, err := a.drainer.Cordon(ctx, node)
	if err != nil {
		return err
	}
	if byAdmin {
		a.log.Info("node was already cordoned by someone else; it stays cordoned after maintenance")
	}

	a.mu.Lock()
	run := a.drain
	a.mu.Unlock()
	if run != nil && run.request != o.Request.ID {
		a.stopDrain() // a drain for an older request
		run = nil
	}
	if run == nil {
		if err := a.publish(ctx, lock.Draining, o, node, "cordoned; draining"); err != nil {
			return err
		}
		run = a.startDrain(ctx, o.Request.ID)
	}
	select {
	case <-run.done:
	default:
		return a.publish(ctx, lock.Draining, o, node, "cordoned; "+a.drainProgress(run))
	}
	a.mu.Lock()
	a.drain = nil
	a.mu.Unlock()
	if run.err != nil {
		return a.drainFailed(ctx, o, node, run.err)
	}
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
	a.event(ctx, node.UID, corev1.EventTypeNormal, ReasonDrained, "node cordoned and drained")
	return a.inMaintenance(ctx, o, node)
}

// confirmHeld asks the API server whether this node still holds one of
// the locks its cache says it holds: one GET per lock, once per
// maintenance.
func (a *Agent) confirmHeld(ctx context.Context, held []string) error {
	for _, name := range held {
		ok, err := a.locks.Holds(ctx, name, a.node)
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
	}
	return fmt.Errorf("drained, but the API server says this node no longer holds %v: waiting for the watch to show it", held)
}

func (a *Agent) drainProgress(run *drainRun) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if run.progress == "" {
		return "draining"
	}
	return run.progress
}

func (a *Agent) startDrain(ctx context.Context, request string) *drainRun {
	dctx, cancel := context.WithCancel(ctx)
	run := &drainRun{request: request, cancel: cancel, done: make(chan struct{})}
	a.mu.Lock()
	a.drain = run
	a.mu.Unlock()
	go func() {
		defer close(run.done)
		defer a.poke()
		counted := 0
		run.disrupted, run.err = a.drainer.Drain(dctx, a.node, func(p drain.Progress) {
			a.mu.Lock()
			run.progress = p.Message
			a.mu.Unlock()
			a.evictedMetrics(p.Evicted - counted)
			counted = p.Evicted
			a.poke()
		})
	}()
	return run
}

// stopDrain cancels a running drain and waits for it to end.
func (a *Agent) stopDrain() {
	a.mu.Lock()
	run := a.drain
	a.drain = nil
	a.mu.Unlock()
	if run != nil {
		run.cancel()
		<-run.done
	}
}

func (a *Agent) drainFailed(ctx context.Context, o decide.Observed, node *corev1.Node, err error) error {
	if a.cfg.Drain.OnTimeout == config.OnTimeoutRelease && errors.Is(err, drain.ErrTimeout) {
		// Give the node back and queue again at the back. Not Failed, but
		// a maintenance that did not happen: said as one.
		a.event(ctx, node.UID, corev1.EventTypeWarning, ReasonMaintenanceFailed, "drain failed: "+err.Error()+"; the node is given back and queues again")
		a.log.Warn("drain failed; giving the node back and queueing again", "err", err)
		if err := a.giveBack(ctx, node); err != nil {
			return err
		}
		if l := a.myRecordLease(); l != nil {
			if err := a.locks.DeleteRecord(ctx, a.node); err != nil {
				return err
			}
			a.leases.Deleted(l.Name, l.ResourceVersion)
		}
		return nil
	}
	a.log.Error("drain failed; holding the lock and the cordon until an admin acts", "err", err)
	a.failedRequest = o.Request.ID
	a.failure = fmt.Sprintf("drain failed: %v; the lock and the cordon are held (fix the cause, then restart the agent to drain again, or release the lock)", err)
	return a.publish(ctx, lock.Failed, o, node, a.failure)
}
