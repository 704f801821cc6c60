package agent

import (
	"fmt"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/lock"
)

// A long queue costs fewer writes: a waiting node far back renews its
// record every other heartbeat, the nodes near the head at every one, and
// no waiting node's record ever goes without a renewal for more than two
// heartbeats (it is stale only after four). Run in the simulated world,
// with every agent's own code, a holder that keeps the lock for the five
// minutes measured and 30 nodes waiting behind it.
func TestFarWaitersRenewEveryOtherHeartbeat(t *testing.T) {
	const n = 30
	w := scenario(t, holderAndWaiters(n)...)
	w.faults.calm = true
	_, order := queueBehindHolder(t, w)
	hb := w.cfg.Queue.Heartbeat
	// Settle for two heartbeats (each node's place reaches its decision),
	// then watch every record's renewals for five minutes.
	start := w.now.Add(2 * hb)
	end := start.Add(5 * time.Minute)
	renewals := map[string]int{}
	last := map[string]time.Time{}
	gap := map[string]time.Duration{}
	runUntil(t, w, 100000, "five minutes of waiting", func() bool {
		if w.now.Before(start) {
			return false
		}
		for _, name := range order {
			r := w.recordOrNil(t, name)
			if r == nil || r.State != lock.Waiting {
				t.Fatalf("%s is no longer waiting: %+v", name, r)
			}
			if prev, ok := last[name]; !ok || r.Heartbeat.After(prev) {
				if ok {
					renewals[name]++
					gap[name] = max(gap[name], r.Heartbeat.Sub(prev))
				}
				last[name] = r.Heartbeat
			}
			if age := w.now.Sub(r.Heartbeat); age > 2*hb+2*time.Second {
				t.Fatalf("%s (place %d) has not renewed its record for %s; want at most two heartbeats (%s)", name, place(order, name), age, 2*hb)
			}
		}
		return !w.now.Before(end)
	})
	near := decide.NearBand + 2 // one slot
	every, other := 5*time.Minute/hb, 5*time.Minute/(2*hb)
	for i, name := range order {
		want := every
		if i+1 > near {
			want = other
		}
		if got := renewals[name]; int64(got) < int64(want)-2 || int64(got) > int64(want)+1 {
			t.Errorf("%s, place %d: %d renewals in 5 minutes (longest gap %s), want about %d", name, i+1, got, gap[name], want)
		}
	}
	t.Logf("in 5 minutes: place 1 renewed %d times, place %d %d times, place %d %d times",
		renewals[order[0]], near, renewals[order[near-1]], n, renewals[order[n-1]])
}

func place(order []string, name string) int {
	for i, n := range order {
		if n == name {
			return i + 1
		}
	}
	return 0
}

// holderAndWaiters names a holder and n waiters.
func holderAndWaiters(n int) []string {
	names := []string{"holder"}
	for i := range n {
		names = append(names, fmt.Sprintf("waiter-%d", i))
	}
	return names
}

// queueBehindHolder has the world's first host take the lock and work for
// an hour, then every other host ask and wait behind it. It returns the
// holder and the waiters in the test's own order: first come (the record
// made first), first served; one priority, one group.
func queueBehindHolder(t *testing.T, w *world) (*host, []string) {
	t.Helper()
	holder, waiters := w.hosts[0], w.hosts[1:]
	n := len(waiters)
	w.request(holder)
	runUntil(t, w, 50*(n+2), "the holder holds the lock and works", func() bool {
		return w.lockHolder(t, lock.DefaultGroup.LockName(0)) == holder.name && holder.inProgress()
	})
	holder.scriptDone = w.now.Add(time.Hour)
	for _, h := range waiters {
		w.request(h)
	}
	runUntil(t, w, 200*n, "every node waiting", func() bool {
		for _, h := range waiters {
			if r := w.recordOrNil(t, h.name); r == nil || r.State != lock.Waiting || r.QueueKey == "" {
				return false
			}
		}
		return true
	})
	order := make([]string, 0, n)
	key := map[string]int{}
	for _, h := range waiters {
		k, err := strconv.Atoi(w.recordOrNil(t, h.name).QueueKey)
		if err != nil {
			t.Fatalf("%s: queue key: %v", h.name, err)
		}
		key[h.name] = k
		order = append(order, h.name)
	}
	sort.Slice(order, func(i, j int) bool { return key[order[i]] < key[order[j]] })
	return holder, order
}
