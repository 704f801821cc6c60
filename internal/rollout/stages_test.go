package rollout

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An entry of a node the rollout does not reach (a compromised node
// writing its own) neither fills the canary's place nor stops the
// rollout.
func TestEntriesOfOtherNodesDoNotCount(t *testing.T) {
	nodes := fleet(3)
	r := newRollout(func(s *Spec) {
		s.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}
		s.Promotion = Promotion{Mode: PromotionAuto}
	})
	took(r, "n2", 0, Succeeded, t0.Add(-time.Hour)) // zone b: not selected
	if got := takers(t, r, nodes, t0); len(got) != 1 || got[0] == "n2" {
		t.Fatalf("%v take it after a forged success by n2, want one canary of zone a", got)
	}
	took(r, "n2", 0, RolledBack, t0)
	if got := takers(t, r, nodes, t0); len(got) != 1 {
		t.Fatalf("a forged failure by n2 stopped the rollout: %v take it", got)
	}
}

// ranked are the names of nodes in the rollout's rank order.
func ranked(r *MaintenanceRollout, nodes []NodeFacts) []string {
	var out []string
	for _, n := range nodes {
		out = append(out, n.Name)
	}
	slices.SortFunc(out, func(a, b string) int { return strings.Compare(rank(r, a), rank(r, b)) })
	return out
}

// A selected node can write only its own entry, but anything in it: an
// entry of a later stage counts for no stage before it.
func TestLaterStageEntriesFillNoEarlierStage(t *testing.T) {
	long := metav1.NewTime(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, c := range []struct {
		name string
		// forge writes the compromised node's entry, given the nodes in
		// rank order; want are the ranks of the nodes that take it then.
		stages []Stage
		forge  func(r *MaintenanceRollout, order []string)
		want   []int
	}{{
		name:  "a success in stage 5 does not fill stage 0",
		forge: func(r *MaintenanceRollout, o []string) { took(r, o[2], 5, Succeeded, long.Time) },
		want:  []int{0},
	}, {
		name:  "nor does the canary's own: the next node takes its place",
		forge: func(r *MaintenanceRollout, o []string) { took(r, o[0], 5, Succeeded, long.Time) },
		want:  []int{1},
	}, {
		name:  "nor a running entry of stage 5",
		forge: func(r *MaintenanceRollout, o []string) { took(r, o[1], 5, Running, time.Time{}) },
		want:  []int{0},
	}} {
		t.Run(c.name, func(t *testing.T) {
			nodes := fleet(5)
			r := newRollout(func(s *Spec) {
				s.Stages = c.stages
				s.Promotion = Promotion{Mode: PromotionAuto} // no soak: a filled stage opens the next at once
			})
			order := ranked(r, nodes)
			c.forge(r, order)
			var want []string
			for _, i := range c.want {
				want = append(want, order[i])
			}
			slices.Sort(want)
			if got := takers(t, r, nodes, t0); !slices.Equal(got, want) {
				t.Fatalf("%v take it, want %v (the nodes in rank order: %v)", got, want, order)
			}
			st, err := Summarize(r, nodes, Room{}, t0, nil)
			if err != nil {
				t.Fatal(err)
			}
			if st.Stage != 0 || st.Stages[0].State == StageSucceeded {
				t.Fatalf("the summary says stage %d is open, stage 0 %s", st.Stage, st.Stages[0].State)
			}
		})
	}
}

// Nodes added or removed shift the rank order: the node the order gives a
// place then takes it too, once; a stage still fills, and no node takes
// the rollout twice.
func TestRankShiftsFillEveryStage(t *testing.T) {
	nodes := fleet(6)
	r := newRollout(func(s *Spec) {
		s.Stages = []Stage{{Nodes: intp(1)}, {Nodes: intp(3)}, {All: true}}
		s.Promotion = Promotion{Mode: PromotionAuto}
	})
	order := ranked(r, nodes)
	canary := order[0]
	took(r, canary, 0, Succeeded, t0)
	took(r, order[1], 1, Succeeded, t0)
	took(r, order[2], 1, Succeeded, t0)
	// The canary's node goes: stage 0 is for the next node in rank order
	// that took no later stage.
	nodes = slices.DeleteFunc(nodes, func(n NodeFacts) bool { return n.Name == canary })
	got := takers(t, r, nodes, t0)
	if len(got) != 1 || got[0] != order[3] {
		t.Fatalf("%v take it after the canary's node went, want %s alone", got, order[3])
	}
	took(r, order[3], 0, Succeeded, t0)
	if got := takers(t, r, nodes, t0); len(got) != 2 {
		t.Fatalf("%v take it once stage 0 filled again, want the last 2 (stage 2)", got)
	}
	for _, n := range nodes {
		if e := r.Entry(n.Name); e == nil {
			took(r, n.Name, 2, Succeeded, t0)
		}
	}
	st, _ := Summarize(r, nodes, Room{}, t0, nil)
	if !hasCond(st, ConditionComplete, metav1.ConditionTrue) {
		t.Fatalf("not complete after every node succeeded: %+v", st.Stages)
	}
	if got := takers(t, r, nodes, t0); len(got) != 0 {
		t.Fatalf("%v take it again", got)
	}
}

// verdicts are what Decide tells each node now, every agent having seen
// before as the nodes that had taken the rollout when it could first ask:
// the nodes that take it, and those that defer, with the stage they defer
// to.
func verdicts(t *testing.T, r *MaintenanceRollout, nodes []NodeFacts, now time.Time, before []string) ([]string, map[string]int) {
	t.Helper()
	var take []string
	deferTo := map[string]int{}
	for _, n := range nodes {
		v, err := Decide(r, n.Name, nodes, Room{}, now, Seen{}, before)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case v.Take && v.Defer:
			t.Fatalf("%s both takes and defers: %+v", n.Name, v)
		case v.Take:
			take = append(take, n.Name)
		case v.Defer:
			deferTo[n.Name] = v.Stage
		}
	}
	return take, deferTo
}

// A node the rollout selects writes its own entry of the first stage,
// succeeded long ago, before the canary could take the rollout: the
// canary's place is still the canary's, the stage has not succeeded, and
// no later stage opens on the forged word.
func TestAForgedEntryStandsInForNoCanary(t *testing.T) {
	nodes := fleet(5)
	r := newRollout(func(s *Spec) { s.Promotion = Promotion{Mode: PromotionAuto} }) // no soak
	order := ranked(r, nodes)
	forger, canary := order[3], order[0]
	took(r, forger, 0, Succeeded, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	// Every agent was there when the rollout came: none saw a taker then.
	take, deferTo := verdicts(t, r, nodes, t0, []string{})
	if !slices.Equal(take, []string{canary}) || len(deferTo) != 0 {
		t.Fatalf("%v take it and %v defer, want the canary %s alone (the nodes in rank order: %v)", take, deferTo, canary, order)
	}
	st, err := Summarize(r, nodes, Room{}, t0, Seen{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Stage != 0 || st.Stages[0].State == StageSucceeded || hasCond(st, ConditionComplete, metav1.ConditionTrue) {
		t.Fatalf("on the forged entry the summary says stage %d is open, stage 0 %s", st.Stage, st.Stages[0].State)
	}
	took(r, canary, 0, Running, time.Time{})
	if take, _ := verdicts(t, r, nodes, t0, []string{}); len(take) != 0 {
		t.Fatalf("%v take it while the canary runs", take)
	}
	took(r, canary, 0, Succeeded, t0)
	take, _ = verdicts(t, r, nodes, t0, []string{})
	if want := []string{order[1], order[2], order[4]}; !sameSet(take, want) {
		t.Fatalf("%v take it once the canary succeeded, want %v", take, want)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// Agents start one by one: the canary takes its place among the nodes
// whose hosts run rollouts so far, and a node whose agent starts later
// and ranks before it does not make a second canary. (Seen: two canaries
// of a one-node stage when the places went by rank alone.)
func TestALateAgentMakesNoSecondCanary(t *testing.T) {
	nodes := fleet(5)
	r := newRollout(nil)
	order := ranked(r, nodes)
	// Only the last in rank order runs rollouts yet: it is the canary.
	var early []NodeFacts
	for _, n := range nodes {
		if n.Name != order[4] {
			n.Labels = map[string]string{}
		}
		early = append(early, n)
	}
	if got := takers(t, r, early, t0); !slices.Equal(got, []string{order[4]}) {
		t.Fatalf("with one host running rollouts, %v take it", got)
	}
	took(r, order[4], 0, Running, time.Time{})
	// Every agent has started now, and saw the canary's entry when it
	// could first ask: those before the canary in rank order defer (here
	// every other node: the canary ranks last).
	before := []string{order[4]}
	take, deferTo := verdicts(t, r, nodes, t0, before)
	if len(take) != 0 {
		t.Fatalf("%v take the canary's stage too (the nodes in rank order: %v)", take, order)
	}
	want := map[string]int{order[0]: 1, order[1]: 1, order[2]: 1, order[3]: 1}
	if fmt.Sprint(deferTo) != fmt.Sprint(want) {
		t.Fatalf("%v defer, want %v", deferTo, want)
	}
	// Until they have, the rank order gives the place to the first.
	if st, _ := Summarize(r, nodes, Room{}, t0, Seen{}); st.Stages[0].State == StageSucceeded {
		t.Fatalf("stage 0 succeeded with its canary running")
	}
	for n := range want {
		took(r, n, 1, Deferred, time.Time{})
	}
	take, deferTo = verdicts(t, r, nodes, t0, before)
	if len(take) != 0 || len(deferTo) != 0 {
		t.Fatalf("after the deferral %v take it and %v defer", take, deferTo)
	}
	took(r, order[4], 0, Succeeded, t0)
	st, err := Summarize(r, nodes, Room{}, t0, Seen{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Stages[0].State != StageSucceeded || st.Stages[0].Took != 1 {
		t.Fatalf("the canary succeeded, the stage is %+v", st.Stages[0])
	}
	r.Spec.Promoted = 1
	take, _ = verdicts(t, r, nodes, t0, before)
	if want := order[:4]; !sameSet(take, want) {
		t.Fatalf("%v take stage 1, want %v (the deferred node among them)", take, want)
	}
}

// An admin shortens the stages after nodes deferred to a later one: a
// deferral beyond the last stage is to the last when that reaches every
// node, so the deferred nodes still take the rollout; beyond a last count
// stage they wait for none. A negative stage counts for nothing.
func TestDeferralsBeyondTheLastStage(t *testing.T) {
	nodes := fleet(4)
	r := newRollout(func(s *Spec) {
		s.Stages = []Stage{{Nodes: intp(1)}, {Nodes: intp(2)}, {All: true}}
		s.Promoted = 2
	})
	order := ranked(r, nodes)
	took(r, order[3], 0, Succeeded, t0)
	took(r, order[0], 2, Deferred, time.Time{})
	took(r, order[1], 2, Deferred, time.Time{})
	r.Spec.Stages = []Stage{{Nodes: intp(1)}, {All: true}}
	r.Spec.Promoted = 1
	take, deferTo := verdicts(t, r, nodes, t0, []string{order[3]})
	if want := []string{order[0], order[1], order[2]}; !sameSet(take, want) || len(deferTo) != 0 {
		t.Fatalf("after the stages were shortened %v take it and %v defer, want %v to take it", take, deferTo, want)
	}
	if st, _ := Summarize(r, nodes, Room{}, t0, Seen{}); hasCond(st, ConditionComplete, metav1.ConditionTrue) {
		t.Fatalf("complete with deferred nodes that never took it: %+v", st.Stages)
	}

	r.Spec.Stages = []Stage{{Nodes: intp(1)}}
	r.Spec.Promoted = 0
	if take, deferTo := verdicts(t, r, nodes, t0, []string{order[3]}); len(take) != 0 || len(deferTo) != 1 {
		t.Fatalf("one stage of one node: %v take it and %v defer (a new deferral beyond it: the one without an entry)", take, deferTo)
	}

	neg := newRollout(nil)
	took(neg, ranked(neg, nodes)[1], -1, Succeeded, t0)
	if take := takers(t, neg, nodes, t0); !slices.Equal(take, []string{ranked(neg, nodes)[0]}) {
		t.Fatalf("with an entry of stage -1, %v take it, want the canary", take)
	}
}
