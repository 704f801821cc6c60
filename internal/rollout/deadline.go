package rollout

import (
	"fmt"
	"slices"
	"time"

	"github.com/kustodian/kustodian/internal/policy"
)

// ConditionAtRisk is the condition of a rollout with a deadline that the
// rollout's first pace, one node at a time, would miss.
const ConditionAtRisk = "AtRisk"

// DefaultTakes is how long a node is taken to spend in a rollout while
// none of its nodes finished yet (kustodian-ctl plan's default too).
const DefaultTakes = 10 * time.Minute

// Pace is how many of a rollout's nodes may be in it at once (queued or
// running), from its deadline and its maxConcurrency.
//
// Without a deadline, Limit is spec.maxConcurrency (0: none; the policy's
// slots alone pace the rollout). With one, the rollout starts one node at
// a time and goes faster only as the deadline needs: Limit is the least
// number of nodes at once whose predicted end is by the deadline, never
// above spec.maxConcurrency; AtRisk says one node at a time would miss it.
// The prediction: the nodes left, in rounds of Limit (of the policy's
// slots, when fewer: more would only queue), each round starting when the
// one before ended or, outside the policy's windows, when the next window
// opens, and taking as long as the rollout's nodes took so far (the median
// of those that succeeded, from when each was queued, or the window's
// opening after, to when it finished; DefaultTakes before any did). The
// policy's slots, windows and gates still decide when each node goes.
type Pace struct {
	Limit        int
	AtRisk       bool
	PredictedEnd time.Time // at Limit; zero without a deadline
	Takes        time.Duration
	Left         int
	InFlight     int
	// Bound is what bounds Limit when even Limit misses the deadline:
	// "spec.maxConcurrency", "the policy's concurrency", or "the
	// policy's windows" (no window opens in time).
	Bound string
}

// BoundWindows is a Pace's Bound when the policy's windows leave no
// time for the nodes left.
const BoundWindows = "the policy's windows"

const noWindow = "no window of the policy opens in time for them (within a year)"

// Room is what the policy gives a rollout's nodes, as a pace predicts
// with it: when grants may start (its windows) and how many of the nodes
// at once (its concurrency; 0: no bound known, as with a policy whose
// groups each have slots of their own). The zero Room is always open.
// The nodes of one rollout may fall under several policies: an agent
// predicts with its own node's, kustodian-ctl with the one most of the
// rollout's nodes fall under.
type Room struct {
	Windows policy.Schedule
	Slots   int
}

// RoomOf is the room a node's policy gives.
func RoomOf(e policy.Effective) Room {
	r := Room{Windows: e.Schedule}
	if e.Spec.GroupBy == "" {
		r.Slots = e.Spec.Slots()
	}
	return r
}

// MostRoom is the room of the policy most of r's nodes (those it selects
// whose hosts run rollouts) fall under, among policies: what a reader
// that is no node (kustodian-ctl) predicts r's pace with.
func MostRoom(r *MaintenanceRollout, nodes []NodeFacts, policies []*policy.MaintenancePolicy) (Room, error) {
	v, err := newView(r, nodes)
	if err != nil {
		return Room{}, err
	}
	count := map[string]int{}
	var most policy.Effective
	for _, n := range v.eligible {
		e := policy.Resolve(policies, n.Labels)
		count[e.Name]++
		if count[e.Name] > count[most.Name] || count[e.Name] == count[most.Name] && e.Name < most.Name {
			most = e
		}
	}
	return RoomOf(most), nil
}

// opened is when a node queued at queued could first go, before it
// finished at finished: queued, or the next opening of the windows.
func (room Room) opened(queued, finished time.Time) time.Time {
	if at, ok := room.Windows.NextOpen(queued); ok && at.Before(finished) {
		return at
	}
	return queued
}

// finish is when n nodes end, c at once, each taking takes, from now: the
// zero time when a window that a round needs never opens.
func (room Room) finish(now time.Time, n, c int, takes time.Duration) time.Time {
	rounds := (n + c - 1) / c
	t := now
	for range rounds {
		at, ok := room.Windows.NextOpen(t)
		if !ok {
			return time.Time{}
		}
		t = at.Add(takes)
	}
	return t
}

// PaceOf is r's pace now, in the room its policy gives.
func PaceOf(r *MaintenanceRollout, nodes []NodeFacts, room Room, now time.Time) (Pace, error) {
	v, err := newView(r, nodes)
	if err != nil {
		return Pace{}, err
	}
	return v.pace(room, now), nil
}

func (v *view) pace(room Room, now time.Time) Pace {
	p := Pace{Takes: DefaultTakes}
	if m := v.r.Spec.MaxConcurrency; m != nil {
		p.Limit = *m
	}
	var took []time.Duration
	for _, n := range v.eligible {
		e, ok := v.entries[n.Name]
		switch {
		case ok && (e.State == Waiting || e.State == Running || e.State == RollingBack || e.State == Retrying):
			p.InFlight++
			p.Left++
		case ok && e.State == Succeeded:
			if e.Started != nil && e.Finished != nil && e.Finished.After(e.Started.Time) {
				took = append(took, e.Finished.Sub(room.opened(e.Started.Time, e.Finished.Time)))
			}
		case ok && finalFailure(e.State):
		default:
			p.Left++
		}
	}
	if len(took) > 0 {
		slices.Sort(took)
		p.Takes = took[len(took)/2]
	}
	d := v.r.Spec.Deadline
	if d == nil {
		return p
	}
	most, bound := p.Limit, "spec.maxConcurrency"
	if most == 0 {
		most, bound = max(p.Left, 1), "the number of nodes left"
	}
	if room.Slots > 0 && room.Slots < most {
		// More would only queue: a node queued waits for a slot, and
		// its wait would count as time it took.
		most, bound = room.Slots, "the policy's concurrency"
	}
	// late says whether c nodes at once end after the deadline; more
	// nodes at once never end later, so the least c that is on time is
	// found by halving.
	late := func(c int) bool {
		end := room.finish(now, p.Left, c, p.Takes)
		return end.IsZero() || end.After(d.Time)
	}
	p.AtRisk = late(1)
	lo, hi := 1, most
	for lo < hi {
		if c := (lo + hi) / 2; late(c) {
			lo = c + 1
		} else {
			hi = c
		}
	}
	p.Limit = lo
	p.PredictedEnd = room.finish(now, p.Left, p.Limit, p.Takes)
	if late(p.Limit) {
		p.Bound = bound
		if p.PredictedEnd.IsZero() {
			p.Bound = BoundWindows
		}
	}
	return p
}

// Full says why node self may not take the rollout now because of its
// pace ("" when it may).
func (p Pace) Full() string {
	if p.Limit == 0 || p.InFlight < p.Limit {
		return ""
	}
	return fmt.Sprintf("%d of the rollout's nodes are in it, as many as its pace allows now (%s)", p.InFlight, p.String())
}

// AtOnceWords says n nodes at once in words: "one node at a time", "3
// nodes at once".
func AtOnceWords(n int) string {
	if n == 1 {
		return "one node at a time"
	}
	return fmt.Sprintf("%d nodes at once", n)
}

// String says the pace in a few words.
func (p Pace) String() string {
	if p.Bound == BoundWindows {
		return fmt.Sprintf("%d at once, %d nodes left: %s", p.Limit, p.Left, noWindow)
	}
	if p.PredictedEnd.IsZero() {
		return fmt.Sprintf("at most %d at once", p.Limit)
	}
	return fmt.Sprintf("%d at once, %d nodes left at about %s each: predicted end %s", p.Limit, p.Left, p.Takes.Round(time.Second), p.PredictedEnd.UTC().Format(time.RFC3339))
}
