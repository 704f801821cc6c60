package fleet

import (
	"fmt"
	"strings"
	"time"
)

// Cluster is what one cluster's own objects say of a fleet rollout, as
// read now.
type Cluster struct {
	Context string
	// Err: the cluster could not be read (unreachable, refused); the
	// rest says nothing then.
	Err error
	// Exists: the cluster has the rollout. Conflict says why the one it
	// has is not this fleet rollout's (another fleet's, another revision):
	// nothing is submitted over it.
	Exists   bool
	Conflict string
	// The rollout's conditions and spec, as its summary is made from the
	// nodes' entries.
	Complete, Failed, Paused, Aborted bool
	// CompletedAt is when its last node finished (Complete only).
	CompletedAt time.Time
	// Says is the rollout's own condition line (Failed's message, what
	// it waits for).
	Says string
	// Takes is how long the rollout is predicted to take in the cluster
	// from now (started) or from when its ring starts (not submitted yet);
	// Unknown: no prediction (the cluster could not be planned).
	Takes   time.Duration
	Unknown bool
}

// Move is a fleet rollout's next move.
type Move struct {
	// Ring is the ring the rollout is at (len(Rings) when every ring is
	// done).
	Ring int
	// Create are the contexts of Ring to submit the rollout to now.
	Create []string
	// Waiting says, one line each, what the rollout waits for: a cluster
	// that cannot be read, a ring's clusters still running, its soak.
	Waiting []string
	// SoakEnds is when Ring's soak ends (zero: not soaking).
	SoakEnds time.Time
	// Halted: a failure, an abort or a conflict stops every ring not
	// started yet; it says where.
	Halted string
	// Done: every ring completed and soaked.
	Done bool
	// Passed says, one line each, the clusters without a copy in rings
	// the rollout has gone past, which it does not submit to.
	Passed []string
}

// Next decides a fleet rollout's next move from what each of its clusters
// says now (by context; a context absent from seen counts as unread).
// Rings go in order: a ring's clusters get the rollout at once; the next
// ring starts once every cluster of the ring is Complete and the ring's
// soak has passed since its last one completed (the last ring's soak is
// not waited for: no ring comes after it). A Failed condition or an abort
// anywhere, or a cluster holding another rollout of the name, halts every
// ring not started. While the rollout is paused in a cluster, nothing is
// submitted anywhere. A cluster without the rollout in a ring the rollout
// has gone past (a later ring has it: its copy was deleted after it ran,
// or the cluster joined the ring since) does not get it again.
func Next(f *Fleet, seen map[string]Cluster, now time.Time) Move {
	var halts, paused []string
	furthest := -1 // the last ring with a copy
	for _, ctx := range f.Contexts() {
		c := seen[ctx]
		if c.Err == nil && c.Exists && c.Conflict == "" {
			furthest = max(furthest, f.RingOf(ctx))
		}
		switch {
		case c.Err != nil || !c.Exists:
		case c.Conflict != "":
			halts = append(halts, fmt.Sprintf("cluster %s: %s", ctx, c.Conflict))
		case c.Failed:
			halts = append(halts, fmt.Sprintf("cluster %s failed: %s", ctx, c.Says))
		case c.Aborted:
			halts = append(halts, fmt.Sprintf("cluster %s: the rollout was aborted", ctx))
		case c.Paused:
			paused = append(paused, ctx)
		}
	}
	var passed []string
	for k, ring := range f.Rings {
		m := Move{Ring: k}
		var missing []string
		var last time.Time
		for _, ctx := range ring.Contexts {
			c, ok := seen[ctx]
			switch {
			case !ok:
				m.Waiting = append(m.Waiting, fmt.Sprintf("cluster %s: not read yet", ctx))
			case c.Err != nil:
				m.Waiting = append(m.Waiting, fmt.Sprintf("cluster %s unreachable: %v; waiting for it", ctx, c.Err))
			case !c.Exists && k < furthest:
				passed = append(passed, fmt.Sprintf("cluster %s has no copy, but a later ring has: not submitted again", ctx))
			case !c.Exists:
				missing = append(missing, ctx)
			case !c.Complete:
				m.Waiting = append(m.Waiting, fmt.Sprintf("cluster %s: %s", ctx, orRunning(c.Says)))
			case c.CompletedAt.After(last):
				last = c.CompletedAt
			}
		}
		m.Passed = passed
		if len(missing) > 0 && len(halts) == 0 {
			if len(paused) > 0 {
				m.Waiting = append(m.Waiting, fmt.Sprintf("paused in %s: ring %s is not submitted to %s until it is resumed",
					strings.Join(paused, ", "), ring.Name, strings.Join(missing, ", ")))
			} else {
				m.Create = missing
			}
		}
		if len(m.Waiting) == 0 && len(missing) == 0 && k < len(f.Rings)-1 {
			if end := last.Add(ring.Soak.Duration); now.Before(end) {
				m.SoakEnds = end
				m.Waiting = append(m.Waiting, fmt.Sprintf("ring %s complete; soaking %s, until %s", ring.Name, ring.Soak.Duration, end.UTC().Format(time.RFC3339)))
			}
		}
		if len(m.Waiting) > 0 || len(missing) > 0 {
			if len(halts) > 0 {
				return Move{Ring: k, Halted: strings.Join(halts, "; "), Passed: passed}
			}
			return m
		}
	}
	if len(halts) > 0 {
		return Move{Ring: len(f.Rings) - 1, Halted: strings.Join(halts, "; "), Passed: passed}
	}
	return Move{Ring: len(f.Rings), Done: true, Passed: passed}
}

func orRunning(s string) string {
	if s == "" {
		return "running"
	}
	return s
}

// ETA is when the fleet rollout is predicted to end: each ring ends when
// its last cluster does (a complete one when it did; one running or not
// started yet Takes after the ring starts), and the next ring starts its
// soak after that, or now. ok is false when a cluster of a ring not done
// has no prediction, or the rollout is halted.
func ETA(f *Fleet, seen map[string]Cluster, now time.Time) (eta time.Time, ok bool) {
	start := now
	for _, ring := range f.Rings {
		var end time.Time
		for _, ctx := range ring.Contexts {
			c, read := seen[ctx]
			switch {
			case !read || c.Err != nil || c.Unknown || c.Failed || c.Aborted || c.Conflict != "":
				return time.Time{}, false
			case c.Complete:
				if c.CompletedAt.After(end) {
					end = c.CompletedAt
				}
			default:
				from := start
				if c.Exists {
					from = now
				}
				if e := from.Add(c.Takes); e.After(end) {
					end = e
				}
			}
		}
		start = end.Add(ring.Soak.Duration)
		if start.Before(now) {
			start = now
		}
		eta = end
	}
	return eta, true
}
