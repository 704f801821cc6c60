package agent

import (
	"context"

	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/lock"
)

// watchShutdown takes the delay inhibitor and subscribes to logind's
// PrepareForShutdown; nil without logind.
func (a *Agent) watchShutdown(ctx context.Context) <-chan bool {
	if a.host.login1 == nil {
		return nil
	}
	// Subscribe before taking the delay lock: a shutdown that starts in
	// between is then seen, not missed.
	c, err := a.host.login1.PrepareForShutdown(ctx)
	if err != nil {
		a.log.Warn("cannot follow shutdowns; a reboot will not be recorded before it happens", "err", err)
		return nil
	}
	if err := a.host.delay.Take(ctx); err != nil {
		a.log.Warn("cannot take the delay inhibitor lock", "err", err)
	}
	return c
}

// onShutdown records that the host is going down (Rebooting, with an
// Event), then lets it go by releasing the delay lock. The lock, the cordon
// and the files stay: after the boot the agent continues from them.
func (a *Agent) onShutdown(ctx context.Context, active bool) {
	if !active { // the shutdown was cancelled
		a.host.shuttingDown = false
		if err := a.host.delay.Take(ctx); err != nil {
			a.log.Warn("cannot take the delay inhibitor lock again", "err", err)
		}
		a.poke()
		return
	}
	a.host.shuttingDown = true
	a.stopDrain()
	defer a.host.delay.Release()
	s, err := a.snapshot()
	if err != nil {
		return
	}
	o, node := s.Observed(), s.node
	if decide.Derive(o) == lock.Idle {
		return
	}
	a.log.Info("the host is shutting down; recording it")
	if err := a.publish(ctx, lock.Rebooting, o, node, "rebooting: the host is going down while holding its place"); err != nil {
		a.log.Warn("could not record the reboot", "err", err)
	}
}

// inhibitFor holds the block inhibitor while Draining and Completing.
func (a *Agent) inhibitFor(ctx context.Context, state lock.State) {
	if a.host.block == nil {
		return
	}
	if state == lock.Draining || state == lock.Completing {
		if err := a.host.block.Take(ctx); err != nil {
			a.log.Warn("cannot take the block inhibitor lock", "err", err)
		}
		return
	}
	a.host.block.Release()
}
