// Package predict answers "when will each node's maintenance start and end,
// and will the rollout fit in its window?" as a pure function of what the
// cluster already knows: each node's past maintenances (its history), the
// queue in grant order, the locks held, and when each gate opens next. It
// holds no client; kustodian-ctl's plan, queue and status share it.
package predict

import (
	"slices"
	"sort"
	"time"

	"github.com/kustodian/kustodian/internal/history"
)

// Sources of an estimate, as plan shows them.
const (
	SourceNode    = "node"    // the node's own past maintenances
	SourcePolicy  = "policy"  // those of the other nodes of its policy
	SourceDefault = "default" // nothing known: DefaultDuration
)

// DefaultDuration is a node's estimate when neither it nor any node of its
// policy has a past maintenance.
const DefaultDuration = 10 * time.Minute

// recent is how many of a node's last maintenances its estimate reads.
const recent = 5

// Estimate is how long a node is predicted to hold its lock: from the grant
// to the release (its drain and its maintenance).
type Estimate struct {
	Duration time.Duration
	Source   string
	// Samples is how many past maintenances it was made from.
	Samples int
}

// held is how long a past maintenance held its lock; 0 when it did not
// take it or did not succeed (a failed one says little of the next).
func held(e history.Entry) time.Duration {
	if e.Result != history.Succeeded || e.Started.IsZero() || !e.Ended.After(e.Started) {
		return 0
	}
	return e.Ended.Sub(e.Started)
}

// heldTimes are the lock-holding times of a node's last recent successful
// maintenances, oldest first.
func heldTimes(entries []history.Entry) []time.Duration {
	var out []time.Duration
	for _, e := range entries {
		if d := held(e); d > 0 {
			out = append(out, d)
		}
	}
	if len(out) > recent {
		out = out[len(out)-recent:]
	}
	return out
}

// median of durations; 0 for none.
func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// History is what the estimates are made from: each node's past
// maintenances (oldest first) and the policy each node follows now.
type History struct {
	Entries map[string][]history.Entry
	Policy  map[string]string
}

// Estimate is the node's predicted lock-holding time: the median of its own
// last successful maintenances; else the median over the last ones of every
// node of its policy; else DefaultDuration.
func (h History) Estimate(node string) Estimate {
	if own := heldTimes(h.Entries[node]); len(own) > 0 {
		return Estimate{Duration: median(own), Source: SourceNode, Samples: len(own)}
	}
	var all []time.Duration
	for n, entries := range h.Entries {
		if h.Policy[n] == h.Policy[node] {
			all = append(all, heldTimes(entries)...)
		}
	}
	if len(all) > 0 {
		return Estimate{Duration: median(all), Source: SourcePolicy, Samples: len(all)}
	}
	return Estimate{Duration: DefaultDuration, Source: SourceDefault}
}

// maxHandoff bounds the gaps Handoff reads: a longer one was a gate that
// held the queue (a window, spacing), not the handoff.
const maxHandoff = time.Minute

// Handoff is the time from one node's release to the next node's grant in
// the same group when the next was already waiting: the queue's own
// latency. It is the median of those gaps in the history (0 when none).
func (h History) Handoff() time.Duration {
	type span struct{ requested, started, ended time.Time }
	groups := map[string][]span{}
	for _, entries := range h.Entries {
		for _, e := range entries {
			if !e.Started.IsZero() && !e.Ended.IsZero() {
				g := e.Policy + "/" + e.Group
				groups[g] = append(groups[g], span{e.Requested, e.Started, e.Ended})
			}
		}
	}
	var gaps []time.Duration
	for _, spans := range groups {
		ends := make([]time.Time, len(spans))
		for i, s := range spans {
			ends[i] = s.ended
		}
		slices.SortFunc(ends, time.Time.Compare)
		for _, next := range spans {
			// The group's latest release at or before its grant.
			i := sort.Search(len(ends), func(k int) bool { return ends[k].After(next.started) })
			if i == 0 {
				continue
			}
			prev := ends[i-1]
			if next.requested.After(prev) { // it was not waiting then
				continue
			}
			if gap := next.started.Sub(prev); gap <= maxHandoff {
				gaps = append(gaps, gap)
			}
		}
	}
	return median(gaps)
}
