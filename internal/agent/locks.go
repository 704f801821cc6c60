package agent

import (
	"context"
	"errors"
	"fmt"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/lock/lockapi"
)

// The agent's door to the locks: its lock Leases, Kured's lock, and the
// queues' summaries (lockSide), with what the maintenance loop does through
// it (take, release all, renew, leave the queues). It keeps what it writes
// in the agent's view of the Leases (leaseView, below) itself, as the
// nodes' records do (recordSide, publish.go), so that the next decision
// sees the write before the cache does.

// acquire tries to take lock name for this node.
func (l *lockSide) acquire(ctx context.Context, name string, group lock.GroupRef, p lock.Params, facts lockapi.FactsFunc) (bool, lock.Verdict, error) {
	taken, v, err := l.store.Acquire(ctx, name, group, l.node, l.view.Get(name), p, facts)
	if err != nil || taken == nil {
		return false, v, err
	}
	l.view.Wrote(taken)
	return true, v, nil
}

// release gives lock name back.
func (l *lockSide) release(ctx context.Context, name string) error {
	released, err := l.store.Release(ctx, name, l.node)
	if err != nil {
		return err
	}
	l.view.Wrote(released)
	return nil
}

// renew renews lock name, held with a TTL.
func (l *lockSide) renew(ctx context.Context, name string) error {
	renewed, err := l.store.Renew(ctx, name, l.node)
	if err != nil {
		return err
	}
	l.view.Wrote(renewed)
	return nil
}

// handOff releases every lock this node holds, naming the next nodes of
// their queues first.
func (l *lockSide) handOff(ctx context.Context) error {
	written, err := l.store.HandOff(ctx, l.node, l.node, l.view.List(), l.staleAfter)
	for _, w := range written {
		l.view.Wrote(w)
	}
	return err
}

// leaveQueues makes again the summaries that still name this node.
func (l *lockSide) leaveQueues(ctx context.Context) error {
	written, err := l.store.LeaveQueues(ctx, l.node, l.view.List(), l.staleAfter)
	for _, w := range written {
		l.view.Wrote(w)
	}
	return err
}

// setDisrupted writes on lock name the controllers its drain disrupted.
func (l *lockSide) setDisrupted(ctx context.Context, name string, controllers []string) error {
	written, err := l.store.SetDisrupted(ctx, name, l.node, controllers)
	if err != nil {
		return err
	}
	l.view.Wrote(written)
	return nil
}

// holds asks the API server whether this node holds lock name.
func (l *lockSide) holds(ctx context.Context, name string) (bool, error) {
	return l.store.Holds(ctx, name, l.node)
}

// all reads the namespace's locks afresh.
func (l *lockSide) all(ctx context.Context) ([]*coordv1.Lease, error) {
	locks, err := l.store.Locks(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]*coordv1.Lease, len(locks))
	for i := range locks {
		out[i] = &locks[i]
	}
	return out, nil
}

// summarize makes this node's own view of group's queue (one LIST).
func (l *lockSide) summarize(ctx context.Context, group lock.GroupRef) (lock.Summary, error) {
	return l.store.Summarize(ctx, group, l.node, l.staleAfter)
}

// saw tells the agent of its own write of a queue Lease.
func (l *lockSide) saw(q *coordv1.Lease) {
	if q != nil && l.sawOwn != nil {
		l.sawOwn(q)
	}
}

// renominate makes group's summary from one LIST and writes it. With
// claim, it first writes the summary's Lease as this node saw it, and
// makes nothing (made false) when another node wrote it meanwhile. A
// *lock.FormatError names the queue Lease or the record of the group that
// is in a newer format.
func (l *lockSide) renominate(ctx context.Context, group lock.GroupRef, claim bool) (mine lock.Summary, made bool, err error) {
	if current := l.view.Get(group.QueueName()); claim && current != nil {
		claimed, err := l.store.TouchSummary(ctx, current, l.node)
		if err != nil || claimed == nil {
			return lock.Summary{}, false, err
		}
		l.view.Wrote(claimed)
		l.saw(claimed)
	}
	mine, written, err := l.store.Renominate(ctx, group, l.node, l.staleAfter)
	if err != nil {
		return mine, false, err
	}
	l.view.Wrote(written)
	l.saw(written)
	return mine, true, nil
}

// newerIsNoError: a summary not renewed because its Lease is in a newer
// format (lock.FormatError) is left to the newer agents; the decisions
// keep this node out of its turn meanwhile.
func newerIsNoError(err error) error {
	if lock.IsFormatError(err) {
		return nil
	}
	return err
}

// touch renews group's summary, which this node heads.
func (l *lockSide) touch(ctx context.Context, group lock.GroupRef) error {
	current := l.view.Get(group.QueueName())
	if current == nil {
		return nil
	}
	written, err := l.store.TouchSummary(ctx, current, l.node)
	if err != nil || written == nil {
		return newerIsNoError(err)
	}
	l.view.Wrote(written)
	l.saw(written)
	return nil
}

// holdKured takes Kured's lock for this node while it holds its own, so
// that Kured reboots no other node meanwhile. false: Kured's lock is taken.
func (a *Agent) holdKured(ctx context.Context) (bool, string, error) {
	l, ok := a.kuredLock()
	if !ok {
		return true, "", nil
	}
	me := kured.HolderID(a.node)
	if l.HeldEverywhere(me) {
		return true, "", nil
	}
	return a.kured.locker.Acquire(ctx, me)
}

func (a *Agent) releaseKured(ctx context.Context) error {
	l, ok := a.kuredLock()
	if !ok {
		return nil
	}
	if !l.HeldAnywhere(kured.HolderID(a.node)) {
		return nil
	}
	if err := a.kured.locker.Release(ctx, kured.HolderID(a.node)); err != nil && !apierrors.IsForbidden(err) {
		return fmt.Errorf("releasing Kured's lock: %w", err)
	}
	return nil
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
// next nodes of their queues first); held are the locks the decision saw
// it hold, which the log names as the Events do.
func (a *Agent) releaseAll(ctx context.Context, held []string) error {
	if err := a.releaseKured(ctx); err != nil {
		return err
	}
	if err := a.locks.handOff(ctx); err != nil {
		return err
	}
	for _, name := range held {
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
// made is this node's own view of the queue from then on. claim: see
// decide.Step.Claim.
func (a *Agent) renominate(ctx context.Context, group lock.GroupRef, claim bool) error {
	mine, made, err := a.locks.renominate(ctx, group, claim)
	if lock.IsFormatError(err) {
		// The summary is left to the newer agents; this node keeps out of
		// its turn, saying why, and lists again as when it joined.
		_, err = a.listed(group, lock.Summary{}, err)
		return err
	}
	if err != nil {
		return err
	}
	if !made {
		a.log.Info("another node wrote the queue's summary first; waiting again", "group", group.String())
		return nil
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
