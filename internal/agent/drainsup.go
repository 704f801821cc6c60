package agent

import (
	"context"
	"errors"
	"fmt"

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
		s.Stuck, s.Disrupted = drain.Stuck(run.err), run.disrupted
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
