package rollout

import (
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
			st, err := Summarize(r, nodes, t0, nil)
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
	st, _ := Summarize(r, nodes, t0, nil)
	if !hasCond(st, ConditionComplete, metav1.ConditionTrue) {
		t.Fatalf("not complete after every node succeeded: %+v", st.Stages)
	}
	if got := takers(t, r, nodes, t0); len(got) != 0 {
		t.Fatalf("%v take it again", got)
	}
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
	// Every agent has started now.
	if got := takers(t, r, nodes, t0); len(got) != 0 {
		t.Fatalf("%v take the canary's stage too (the nodes in rank order: %v)", got, order)
	}
}
