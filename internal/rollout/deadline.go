package rollout

import (
	"fmt"
	"slices"
	"time"
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
// The prediction: the nodes left, in rounds of Limit, each round taking
// as long as the rollout's nodes took so far (the median from queued to
// finished of those that succeeded; DefaultTakes before any did). The
// policy's slots, windows and gates still decide when each node goes: a
// limit above the policy's slots only queues more nodes.
type Pace struct {
	Limit        int
	AtRisk       bool
	PredictedEnd time.Time // at Limit; zero without a deadline
	Takes        time.Duration
	Left         int
	InFlight     int
}

// PaceOf is r's pace now.
func PaceOf(r *MaintenanceRollout, nodes []NodeFacts, now time.Time) (Pace, error) {
	v, err := newView(r, nodes)
	if err != nil {
		return Pace{}, err
	}
	return v.pace(now), nil
}

func (v *view) pace(now time.Time) Pace {
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
				took = append(took, e.Finished.Sub(e.Started.Time))
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
	most := p.Limit
	if most == 0 {
		most = max(p.Left, 1)
	}
	end := func(c int) time.Time {
		rounds := (p.Left + c - 1) / c
		return now.Add(time.Duration(rounds) * p.Takes)
	}
	p.AtRisk = end(1).After(d.Time)
	p.Limit = most
	for c := 1; c <= most; c++ {
		if !end(c).After(d.Time) {
			p.Limit = c
			break
		}
	}
	p.PredictedEnd = end(p.Limit)
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

// String says the pace in a few words.
func (p Pace) String() string {
	if p.PredictedEnd.IsZero() {
		return fmt.Sprintf("at most %d at once", p.Limit)
	}
	return fmt.Sprintf("%d at once, %d nodes left at about %s each: predicted end %s", p.Limit, p.Left, p.Takes.Round(time.Second), p.PredictedEnd.UTC().Format(time.RFC3339))
}
