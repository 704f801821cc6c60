package agent

import (
	"fmt"
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/lock"
)

// A node far back in a fast queue sleeps: it does not watch the lock and
// queue Leases while the handoffs ahead of it go by, and reads them with
// a few LISTs instead, so what it receives before its turn does not grow
// with its place; and the queue still serves every node in its order. Run
// in the simulated world with every agent's own code: a holder, n nodes
// queued behind it, then two-second maintenances (a handoff every two
// seconds or so: a fleet that is patched already). FAST_QUEUE=N adds a
// run with N nodes (the protocol at fleet size; see docs/performance.md
// for how long 1,000 take).
func TestFarWaitersSleepThroughAFastQueue(t *testing.T) {
	for _, n := range sizesAnd(t, "FAST_QUEUE", 60) {
		t.Run(fmt.Sprintf("%d nodes", n), func(t *testing.T) { sleepThroughAFastQueue(t, n) })
	}
}

func sleepThroughAFastQueue(t *testing.T, n int) {
	w := fastQueue(t, n)
	holder, order := queueBehindHolder(t, w)
	waiters := w.hosts[1:]
	lockName := lock.DefaultGroup.LockName(0)
	byName := map[string]*host{}
	for _, h := range waiters {
		byName[h.name] = h
	}
	// From the release on: what each node's watch of the group Leases
	// delivers, and how many LISTs it makes, until its turn.
	events, lists := map[string]int{}, map[string]int{}
	for _, h := range waiters {
		events[h.name], lists[h.name] = -h.watches[0].delivered, -h.leaseLists
	}
	holder.scriptDone = w.now
	start, began := w.now, time.Now()
	var granted []string
	var grantAt []time.Time
	runUntil(t, w, 3000*n, "every node served", func() bool {
		if hl := w.lockHolder(t, lockName); hl != "" && hl != "holder" && (len(granted) == 0 || granted[len(granted)-1] != hl) {
			granted = append(granted, hl)
			grantAt = append(grantAt, w.now)
			h := byName[hl]
			events[hl] += h.watches[0].delivered
			lists[hl] += h.leaseLists
			if n >= 500 && len(granted)%(n/10) == 0 {
				t.Logf("%d of %d served (%s simulated, %s of wall time)", len(granted), n, w.now.Sub(start).Round(time.Second), time.Since(began).Round(time.Second))
			}
		}
		return len(granted) == n
	})
	took, wall := w.now.Sub(start), time.Since(began)
	// No node sleeps through its turn: with two-second maintenances, the
	// next grant comes within a heartbeat of the last (a sleeper at the
	// head would hold it up until its next look).
	prev := start
	for i, at := range grantAt {
		if gap := at.Sub(prev); gap > w.cfg.Queue.Heartbeat {
			t.Errorf("%s, place %d, took the lock %s after the grant before it; want at most a heartbeat (%s)", granted[i], i+1, gap, w.cfg.Queue.Heartbeat)
		}
		prev = at
	}
	for i := range order {
		if granted[i] != order[i] {
			t.Fatalf("grants out of order at place %d: got %v, want %v", i+1, granted, order)
		}
	}
	near := decide.NearBand + 2
	most, mostAt := 0, 0
	for i, name := range order {
		if events[name] > most {
			most, mostAt = events[name], i+1
		}
	}
	t.Logf("%d handoffs in %s (simulated, %s of wall time); group-Lease events before its turn: place 1 %d, place %d %d, place %d %d, place %d %d (most: %d, place %d); LISTs of Leases: place %d %d, place %d %d",
		n, took.Round(time.Second), wall.Round(time.Second), events[order[0]], near, events[order[near-1]], n/2, events[order[n/2-1]], n, events[order[n-1]],
		most, mostAt, n/2, lists[order[n/2-1]], n, lists[order[n-1]])
	// A node watching all along receives every handoff's few events; one
	// asleep far back, only those from the nodes near it on.
	limit := 4 * (near + 2*decide.SleepMargin*2)
	for i, name := range order {
		if events[name] > limit {
			t.Errorf("%s, place %d: %d group-Lease events before its turn; want at most %d whatever its place", name, i+1, events[name], limit)
		}
		// A sleeper looks at least once per longest sleep, more often as
		// its turn comes near: a few LISTs, and one a minute of waiting.
		longest := decide.SleepMax * w.cfg.Queue.Heartbeat
		if most := 12 + int(grantAt[i].Sub(start)/longest); lists[name] > most {
			t.Errorf("%s, place %d: %d LISTs of Leases before its turn (%s); want at most %d", name, i+1, lists[name], grantAt[i].Sub(start).Round(time.Second), most)
		}
	}
}

// Nodes asleep far back still pass the nodes ahead of them when those are
// all gone: a look that finds a lock free looks again 2.5 heartbeats later,
// and a queue that has not moved meanwhile wakes it to watch and, four
// heartbeats on, to pass the head. The steps: a fast queue until nodes far
// back sleep, a holder that works a while, every node awake and waiting
// stopped (SIGTERM), then the holder done: its release names the stopped
// nodes first (their records were fresh at its LIST).
func TestSleepersPassTheGoneNodesAhead(t *testing.T) {
	const n = 40
	w := fastQueue(t, n)
	lockName := lock.DefaultGroup.LockName(0)
	for _, h := range w.hosts {
		w.request(h)
	}
	holder, sleeping := sleepThenHold(t, w)
	stopped := 0
	for _, h := range w.hosts {
		if h != holder && h.requested() && !sleeping[h.name] {
			h.stop("stopped (SIGTERM) while waiting near the head")
			stopped++
		}
	}
	if len(sleeping) == 0 || stopped == 0 {
		t.Fatalf("%d asleep, %d stopped: the steps need both", len(sleeping), stopped)
	}
	holder.scriptDone = w.now
	var freed time.Time
	runUntil(t, w, 500*n, "the holder releases", func() bool {
		if w.lockHolder(t, lockName) == "" {
			freed = w.now
			return true
		}
		return false
	})
	var next string
	runUntil(t, w, 1000*n, "a live node takes the lock", func() bool {
		next = w.lockHolder(t, lockName)
		return next != ""
	})
	took := w.now.Sub(freed)
	t.Logf("%d nodes stopped near the head, %d asleep behind them: %s took the lock %s after the release", stopped, len(sleeping), next, took.Round(time.Millisecond))
	if !sleeping[next] {
		t.Errorf("%s took the lock; want one of the nodes that were asleep", next)
	}
	hb := w.cfg.Queue.Heartbeat
	if bound := decide.SleepMax*hb + 5*hb/2 + w.cfg.Queue.StaleAfter() + hb; took > bound {
		t.Errorf("the lock was free for %s; want at most %s (the longest sleep, the second look 2.5 heartbeats later, four heartbeats, one for the takeover)", took.Round(time.Second), bound)
	}
}

// A node that renewed its record every other heartbeat (far back) and is
// now at the head renews it before its gate command runs (which may take
// two heartbeats, with none beaten meanwhile); one renewed less than a
// heartbeat ago does not write again.
func TestRecordRenewedBeforeTheGateCommand(t *testing.T) {
	w := scenario(t, "holder", "next")
	w.faults.calm = true
	holder, next := w.hosts[0], w.hosts[1]
	w.request(holder)
	runUntil(t, w, 200, "the holder holds the lock and works", func() bool {
		return w.lockHolder(t, lock.DefaultGroup.LockName(0)) == "holder" && holder.inProgress()
	})
	holder.scriptDone = w.now.Add(time.Hour)
	w.request(next)
	runUntil(t, w, 200, "the next node waits", func() bool {
		r := w.recordOrNil(t, "next")
		return r != nil && r.State == lock.Waiting
	})
	beat := w.recordOrNil(t, "next").Heartbeat
	w.now = beat.Add(w.cfg.Queue.Heartbeat / 2)
	w.clock.SetTime(w.now)
	if err := next.agent.renewBeforeCommand(next.ctx); err != nil {
		t.Fatal(err)
	}
	if got := w.recordOrNil(t, "next").Heartbeat; !got.Equal(beat) {
		t.Errorf("renewed half a heartbeat after the last renewal (%s → %s); want no write", beat, got)
	}
	w.now = beat.Add(9 * w.cfg.Queue.Heartbeat / 5)
	w.clock.SetTime(w.now)
	if err := next.agent.renewBeforeCommand(next.ctx); err != nil {
		t.Fatal(err)
	}
	r := w.recordOrNil(t, "next")
	if !r.Heartbeat.Equal(w.now) || r.State != lock.Waiting {
		t.Errorf("1.8 heartbeats after the last renewal: record %s, heartbeat %s; want Waiting, renewed now (%s)", r.State, r.Heartbeat, w.now)
	}
}

// A node asleep far back never passes a head on what its last look saw:
// with lock.ttl, a lock renewed since looks expired in its store, and a
// takeover made from there would write the queue Lease again and again
// (its own writes have no watch to come back by). It watches first, sees
// the lock renewed, and leaves it. The steps: a fast queue until nodes
// far back sleep, then a holder that works (and renews its lock) for
// three minutes.
func TestSleepersDoNotTakeOverFromTheirLastLook(t *testing.T) {
	const n = 40
	w := fastQueue(t, n)
	w.cfg.Lock.TTL = 20 * time.Second
	for _, h := range w.hosts {
		h.agent.cfg.Lock.TTL = w.cfg.Lock.TTL
		w.request(h)
	}
	lockName := lock.DefaultGroup.LockName(0)
	holder, sleeping := sleepThenHold(t, w)
	writes := map[string]int{}
	for _, h := range w.hosts {
		writes[h.name] = h.queueWrites
	}
	end := w.now.Add(3 * time.Minute)
	runUntil(t, w, 100000, "three minutes of maintenance", func() bool { return !w.now.Before(end) })
	if got := w.lockHolder(t, lockName); got != holder.name {
		t.Fatalf("the lock went from %s to %q while it worked and renewed it", holder.name, got)
	}
	for _, h := range w.hosts {
		if d := h.queueWrites - writes[h.name]; d > 2 {
			t.Errorf("%s (asleep before: %v) wrote the queue Lease %d times in three minutes of a live holder; want at most 2", h.name, sleeping[h.name], d)
		}
	}
}

// fastQueue is a calm world of a holder and n waiters whose maintenances
// take two seconds: a handoff every two seconds or so.
func fastQueue(t *testing.T, n int) *world {
	w := scenario(t, holderAndWaiters(n)...)
	w.faults.calm = true
	work := 2 * time.Second
	w.faults.work = &work
	return w
}

// sleepThenHold runs a queue whose nodes all asked until ten of them sleep
// far back, then has the node in maintenance work for an hour. It returns
// that node and the nodes asleep then.
func sleepThenHold(t *testing.T, w *world) (*host, map[string]bool) {
	t.Helper()
	n := len(w.hosts)
	asleep := func() map[string]bool {
		sleeping := map[string]bool{}
		for _, h := range w.hosts {
			if h.agent != nil && h.agent.queue.far.asleep {
				sleeping[h.name] = true
			}
		}
		return sleeping
	}
	runUntil(t, w, 500*n, "ten nodes asleep far back", func() bool { return len(asleep()) >= 10 })
	lockName := lock.DefaultGroup.LockName(0)
	var holder *host
	runUntil(t, w, 500*n, "a node in maintenance", func() bool {
		for _, h := range w.hosts {
			if h.inProgress() && w.lockHolder(t, lockName) == h.name {
				holder = h
				return true
			}
		}
		return false
	})
	holder.scriptDone = w.now.Add(time.Hour)
	return holder, asleep()
}
