package rollout

import (
	"fmt"
	"slices"
	"time"
)

// Verdict is whether a node takes a rollout now.
type Verdict struct {
	// Take: run the rollout on this node now, as part of Stage.
	Take  bool
	Stage int
	// Unselected: the rollout does not select this node (it is none of
	// the rollout's, whatever else holds).
	Unselected bool
	// Defer: write this node's entry Deferred to Stage: the places it
	// would have had in the stages before were taken before it could ask.
	Defer bool
	// Why says why not (or which stage it is in).
	Why string
	// WakeAt is when to decide again by the clock (a soak ends); zero:
	// at the next change.
	WakeAt time.Time
}

// Decide says whether node self takes rollout r now: the rollout is
// neither paused, aborted nor stopped by a failure; the node is selected,
// its host runs rollouts, it has not taken this revision; and the stage
// open now reaches it. A count stage's places go to the nodes in rank
// order (reaches), whoever else wrote an entry; the claim is written with
// the rollout's resourceVersion, so that a node decides again on every
// entry written meanwhile. seen is when the deciding agent first saw each
// stage succeed (Seen): automatic promotion soaks from then.
//
// before are the nodes that had taken the revision when self could first
// take it (its agent first saw the rollout with its host running rollouts),
// as the deciding agent saw them; nil: every node that took it so far (a
// reader with no observation of its own). A count stage whose places such
// nodes filled is not self's: those nodes took their places before self
// could ask, in turn as they saw it (an agent started late), and self
// defers to the next stage (Defer) rather than make one node more run the
// stage. A node that took a place out of turn while self could ask stands
// in for no one: self takes the place rank order gives it.
func Decide(r *MaintenanceRollout, self string, nodes []NodeFacts, room Room, now time.Time, seen Seen, before []string) (Verdict, error) {
	v, err := newView(r, nodes)
	if err != nil {
		return Verdict{}, err
	}
	if v.took(self) {
		return Verdict{Why: "this node took revision " + v.rev}, nil
	}
	if !slices.ContainsFunc(v.eligible, func(n NodeFacts) bool { return n.Name == self }) {
		if slices.ContainsFunc(v.selected, func(n NodeFacts) bool { return n.Name == self }) {
			return Verdict{Why: "this node's host does not run rollouts (rollouts.enabled)"}, nil
		}
		return Verdict{Unselected: true, Why: "the rollout does not select this node"}, nil
	}
	if why := v.halted(); why != "" {
		return Verdict{Why: why}, nil
	}
	o, wake := v.open(now, seen)
	from := 0 // the first stage self is a candidate for (its deferral)
	if e, ok := v.entries[self]; ok {
		from = e.Stage
	}
	late := from
	for k := from; k <= o; k++ {
		if v.displaces(self, k, before) {
			late = k + 1
			continue
		}
		if !v.reach[k][self] {
			continue
		}
		why := Numbered(k) + " reaches this node"
		if s := v.stages[k]; s.Nodes != nil || s.Percent != nil {
			why = Numbered(k) + " has room for this node"
		}
		if full := v.pace(room, now).Full(); full != "" {
			return Verdict{Why: full}, nil
		}
		return Verdict{Take: true, Stage: k, Why: why}, nil
	}
	if late > from {
		why := fmt.Sprintf("the places of %s were taken before this node could ask; it waits for %s", Numbered(late-1), Numbered(late))
		if late == len(v.stages) {
			why = fmt.Sprintf("the places of %s, the last, were taken before this node could ask", Numbered(late-1))
		}
		return Verdict{Defer: true, Stage: late, Why: why}, nil
	}
	switch {
	case o < len(v.stages)-1 && !wake.IsZero():
		return Verdict{Why: fmt.Sprintf("%s does not reach this node; the next opens when its soak ends, at about %s", Numbered(o), wake.UTC().Format(time.RFC3339)), WakeAt: wake}, nil
	case o < len(v.stages)-1 && r.Spec.Promotion.Mode == PromotionAuto:
		return Verdict{Why: fmt.Sprintf("%s does not reach this node; the next opens once it succeeded and soaked", Numbered(o))}, nil
	case o < len(v.stages)-1:
		return Verdict{Why: fmt.Sprintf("%s does not reach this node; the next opens when promoted", Numbered(o))}, nil
	}
	return Verdict{Why: "no stage reaches this node", WakeAt: wake}, nil
}

// displaces reports whether self, taking count stage k now, would take
// the place of a node that took it before self could ask: the nodes of
// before (nil: every node that took the revision) fill the stage's places,
// in stage k or one before it, and one of them ranks after self.
func (v *view) displaces(self string, k int, before []string) bool {
	t := v.target(v.stages[k])
	if t < 0 {
		return false // a selector or all: every node it reaches has a place
	}
	n, after := 0, false
	for name, e := range v.entries {
		if e.Stage > k || !v.took(name) || before != nil && !slices.Contains(before, name) {
			continue
		}
		n++
		after = after || rank(v.r, name) > rank(v.r, self)
	}
	return n >= t && after
}

// Observation is what an agent records of a rollout at one look (one
// view of it): the stages that have succeeded now, in order (it records
// the first time it sees each: Seen); whether its node can take it now
// (selected, and its host runs rollouts); and the nodes that have taken
// its revision (in any state, a deferral not counted), which it records
// as Decide's before when its node can first take it.
type Observation struct {
	Succeeded []int
	Eligible  bool
	Takers    []string
}

// Observe is what node self's agent sees of r now.
func Observe(r *MaintenanceRollout, nodes []NodeFacts, self string) (Observation, error) {
	v, err := newView(r, nodes)
	if err != nil {
		return Observation{}, err
	}
	o := Observation{Takers: []string{}, Eligible: slices.ContainsFunc(v.eligible, func(n NodeFacts) bool { return n.Name == self })}
	for k := range v.stages {
		if ok, _ := v.succeeded(k); ok {
			o.Succeeded = append(o.Succeeded, k)
		}
	}
	for name := range v.entries {
		if v.took(name) {
			o.Takers = append(o.Takers, name)
		}
	}
	slices.Sort(o.Takers)
	return o, nil
}

// OpenSurely is the stage open now as far as a reader with no observation
// of its own (kustodian-ctl) can be sure: a stage that succeeded is taken
// as seen to succeed just now, so that no soak counts as passed on the
// entries' finish times, which the nodes write. The agents may be further
// on, never behind it.
func OpenSurely(r *MaintenanceRollout, nodes []NodeFacts, now time.Time) (int, error) {
	v, err := newView(r, nodes)
	if err != nil {
		return 0, err
	}
	seen := Seen{}
	for k := range v.stages {
		seen[k] = now
	}
	o, _ := v.open(now, seen)
	return o, nil
}
