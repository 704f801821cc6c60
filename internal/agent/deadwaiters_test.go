package agent

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/simapi"
)

// Waiting nodes whose agents are gone must not keep a free lock idle: with
// any number of them ahead in the queue, a live node that asks gets the
// lock within a minute of its release (the summary's head is found gone
// after four heartbeats, and one node behind makes the summary again
// within the heartbeat after). The steps: a holder, n nodes that queue
// behind it and are then stopped, one more that asks after them, the
// holder done. Run in the simulated world, with every agent's own code.
// DEAD_WAITERS=N adds a run with N of them (on two cores, 1000 take about
// a minute, 3000 about 19: every agent's start lists every record).
func TestDeadWaitersArePassedWithinAMinute(t *testing.T) {
	for _, n := range sizesAnd(t, "DEAD_WAITERS", 10, 100) {
		t.Run(fmt.Sprintf("%d dead", n), func(t *testing.T) {
			names := []string{"holder"}
			for i := range n {
				names = append(names, fmt.Sprintf("dead-%d", i))
			}
			names = append(names, "live")
			w := scenario(t, names...)
			w.faults.calm = true // no new requests, no faults; scripts end soon
			holder, live, dead := w.hosts[0], w.hosts[n+1], w.hosts[1:n+1]
			lockName := lock.DefaultGroup.LockName(0)

			w.request(holder)
			runUntil(t, w, 50*(n+2), "the holder holds the lock and works", func() bool {
				return w.lockHolder(t, lockName) == "holder" && holder.inProgress()
			})
			// Hold the holder's script until the others are queued and gone.
			holder.scriptDone = w.now.Add(time.Hour)
			for _, h := range dead {
				w.request(h)
			}
			runUntil(t, w, 200*n, "the n nodes wait", func() bool {
				for _, h := range dead {
					if r := w.recordOrNil(t, h.name); r == nil || r.State != lock.Waiting {
						return false
					}
				}
				return true
			})
			w.request(live)
			runUntil(t, w, 200*n, "the last node waits too", func() bool {
				r := w.recordOrNil(t, "live")
				return r != nil && r.State == lock.Waiting
			})
			for _, h := range dead {
				h.stop("stopped (SIGTERM) while waiting")
			}
			holder.scriptDone = w.now
			var freed time.Time
			runUntil(t, w, 50*(n+2), "the holder releases", func() bool {
				if w.lockHolder(t, lockName) == "" {
					freed = w.now
					return true
				}
				return false
			})
			// The holder's release named the dead nodes (their records were
			// fresh at its LIST) ahead of the live one.
			if s := w.summaryOrNil(t); s == nil || len(s.Nodes) == 0 || s.Nodes[0] == "live" {
				t.Fatalf("the summary at the release: %+v; want stopped nodes ahead of live", s)
			}
			runUntil(t, w, 200*(n+2), "the live node takes the lock", func() bool {
				return w.lockHolder(t, lockName) == "live"
			})
			took := w.now.Sub(freed)
			t.Logf("%d dead waiting nodes ahead: the live node took the lock %s after the release", n, took.Round(time.Millisecond))
			if took > time.Minute {
				t.Errorf("the lock was free for %s while a live node asked behind %d dead ones; want at most a minute", took.Round(time.Second), n)
			}
		})
	}
}

// sizesAnd are a test's numbers of nodes: the given ones, then the one the
// environment variable env names when set (a run at fleet size, too long
// for every run).
func sizesAnd(t *testing.T, env string, given ...int) []int {
	v := os.Getenv(env)
	if v == "" {
		return given
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a number of nodes", env, v)
	}
	return append(given, n)
}

// runUntil takes the world's actions until done holds, failing the test
// after max actions. The world here is a prompt one, as a real API server
// on a LAN is: a watch delivers what it has at once, an agent whose turn
// it is steps at once, and time passes only when nothing else is to be
// done, to the next timer, by a second at most. (The seeded simulation's
// random delays, seconds long, would measure its own slowness here.)
func runUntil(t *testing.T, w *world, max int, what string, done func() bool) {
	t.Helper()
	for i := 0; !done(); i++ {
		if i == max {
			t.Fatalf("%s: not after %d actions (simulated time %s)", what, max, w.now.Format("15:04:05"))
		}
		w.promptAct()
	}
}

func (w *world) promptAct() {
	w.housekeeping()
	if w.quietAt != w.api.RV() {
		for _, h := range w.hosts {
			if h.running() && h.pendingWatches() {
				for _, sw := range h.watches {
					sw.deliver(w.api, -1)
				}
				return
			}
		}
		w.quietAt = w.api.RV()
	}
	for _, h := range w.hosts {
		if h.due() {
			h.step()
			return
		}
	}
	for _, h := range w.hosts {
		if h.drainRunning() {
			h.finishDrain()
			return
		}
	}
	next := w.now.Add(time.Second)
	for _, h := range w.hosts {
		next = earliestOf(next, h.nextTimer(), h.scriptDone)
	}
	w.now = maxTime(next, w.now.Add(time.Millisecond))
	w.clock.SetTime(w.now)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// leaseOrNil reads a Lease; nil when there is none, and any other error
// fails the test.
func (w *world) leaseOrNil(t *testing.T, name string) *coordv1.Lease {
	t.Helper()
	o, err := w.api.Get(simapi.Key{Resource: simapi.Leases, Namespace: simNamespace, Name: name})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("reading %s: %v", name, err)
	}
	return o.(*coordv1.Lease)
}

func (w *world) summaryOrNil(t *testing.T) *lock.Summary {
	t.Helper()
	l := w.leaseOrNil(t, lock.DefaultGroup.QueueName())
	if l == nil {
		return nil
	}
	s, err := lock.SummaryFromLease(l)
	if err != nil {
		t.Fatalf("the queue's summary: %v", err)
	}
	return &s
}

func (w *world) recordOrNil(t *testing.T, node string) *lock.Record {
	t.Helper()
	l := w.leaseOrNil(t, "node-"+node)
	if l == nil {
		return nil
	}
	r := lock.RecordFromLease(l)
	return &r
}

// lockHolder is the lock's holder, "" when it is free or not made yet.
func (w *world) lockHolder(t *testing.T, name string) string {
	t.Helper()
	if l := w.leaseOrNil(t, name); l != nil {
		return holderOf(l)
	}
	return ""
}
