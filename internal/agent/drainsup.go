package agent

import (
	"context"
	"errors"

	corev1 "k8s.io/api/core/v1"

	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/drain"
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

// clearDrain forgets the drain that ended, once acted on.
func (a *Agent) clearDrain(run *drainRun) {
	a.drain.mu.Lock()
	defer a.drain.mu.Unlock()
	if a.drain.run == run {
		a.drain.run = nil
	}
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
