package agent

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/lock"
)

// waiting acts on a Waiting decision: it publishes the node's place and the
// gate that holds it, and takes a lock when the decision says which to try.
func (a *Agent) waiting(ctx context.Context, d decide.Decision, o decide.Observed, node *corev1.Node) error {
	if o.InProgress {
		// Left from an interrupted cycle: it must not tell a script to go
		// ahead while this node does not hold the lock.
		if err := a.files.RemoveInProgress(); err != nil {
			return err
		}
	}
	a.applyEffects(ctx, uidOf(node), a.myRecord(), d.Effects)
	if len(d.Try) == 0 {
		if err := a.publish(ctx, lock.Waiting, o, node, d.Message); err != nil {
			return err
		}
		return a.queueUpkeep(ctx, d)
	}
	// Others must see this node eligible before it takes a slot, or the
	// node behind it could take the slot meant for it.
	if r := a.myRecord(); r == nil || r.State != lock.Waiting || r.Blocked != "" {
		if err := a.publish(ctx, lock.Waiting, o, node, d.Message); err != nil {
			return err
		}
	}
	params := lock.Params{StaleAfter: a.cfg.Queue.StaleAfter(), TTL: a.cfg.Lock.TTL, Owner: a.owner}
	for _, name := range d.Try {
		taken, v, err := a.locks.acquire(ctx, name, d.Group, params, a.holderFacts)
		if err != nil {
			return err
		}
		if !taken {
			a.log.Debug("lock not acquired", "lock", name, "why", v.Why)
			continue
		}
		if ok, why, err := a.holdKured(ctx); err != nil || !ok {
			// Kured took its lock meanwhile: give ours back and wait.
			if rerr := a.locks.release(ctx, name); rerr != nil {
				return rerr
			}
			if err != nil {
				return err
			}
			a.log.Info("Kured's lock is taken; gave the lock back", "why", why)
			return nil
		}
		a.log.Info("lock acquired", "lock", name, "group", d.Group.String(), "note", v.Why)
		a.poke() // go on to Draining at once
		return nil
	}
	return a.publish(ctx, lock.Waiting, o, node, d.Message)
}

// queueUpkeep makes the group's queue summary again, or renews it, when the
// decision says so (decide.Decision.Renominate, Touch). The node's record is
// written first: the LIST must see it as it is.
func (a *Agent) queueUpkeep(ctx context.Context, d decide.Decision) error {
	switch {
	case d.Renominate != "":
		a.log.Info("making the queue's summary again", "group", d.Group.String(), "why", d.Renominate)
		return a.renominate(ctx, d.Group)
	case d.Touch:
		return a.locks.touch(ctx, d.Group)
	}
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
