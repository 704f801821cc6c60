package rollout

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC)

func intp(n int) *int { return &n }

// fleet is n nodes whose hosts run rollouts, created before t0.
func fleet(n int) []NodeFacts {
	var out []NodeFacts
	for i := 1; i <= n; i++ {
		out = append(out, NodeFacts{Name: fmt.Sprintf("n%d", i), Created: t0.Add(-time.Hour),
			Labels: map[string]string{LabelRollouts: "enabled", "zone": map[bool]string{true: "a", false: "b"}[i%2 == 1]}})
	}
	return out
}

func newRollout(change func(*Spec)) *MaintenanceRollout {
	r := &MaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "kustodian", Name: "fix", UID: "uid-1", CreationTimestamp: metav1.NewTime(t0)},
		Spec: Spec{Script: Source{Inline: "true\n", SHA256: SHA256([]byte("true\n"))}}}
	if change != nil {
		change(&r.Spec)
	}
	return r
}

// takers are the nodes Decide lets take the rollout now, no stage seen
// to succeed before.
func takers(t *testing.T, r *MaintenanceRollout, nodes []NodeFacts, now time.Time) []string {
	t.Helper()
	return takersSeen(t, r, nodes, now, nil)
}

// takersSeen are the nodes Decide lets take the rollout now, their agents
// having seen the stages succeed as seen says.
func takersSeen(t *testing.T, r *MaintenanceRollout, nodes []NodeFacts, now time.Time, seen Seen) []string {
	t.Helper()
	var out []string
	for _, n := range nodes {
		v, err := Decide(r, n.Name, nodes, Room{}, now, seen, nil)
		if err != nil {
			t.Fatal(err)
		}
		if v.Take {
			out = append(out, n.Name)
		}
	}
	return out
}

// took records that node took the rollout in stage, in state.
func took(r *MaintenanceRollout, node string, stage int, state string, finished time.Time) {
	e := NodeStatus{Name: node, Revision: Revision(r.Namespace, r.Name, r.Spec), Stage: stage, State: state}
	if !finished.IsZero() {
		f := metav1.NewTime(finished)
		e.Finished = &f
	}
	for i := range r.Status.Nodes {
		if r.Status.Nodes[i].Name == node {
			r.Status.Nodes[i] = e
			return
		}
	}
	r.Status.Nodes = append(r.Status.Nodes, e)
}

// The default stages: exactly one node takes it first; the others only
// once an admin promotes, and then all of them.
func TestDecideCanaryThenAll(t *testing.T) {
	nodes := fleet(5)
	r := newRollout(nil)
	first := takers(t, r, nodes, t0)
	if len(first) != 1 {
		t.Fatalf("%v take the first stage, want one node", first)
	}
	canary := first[0]
	took(r, canary, 0, Waiting, time.Time{})
	if got := takers(t, r, nodes, t0); len(got) != 0 {
		t.Fatalf("%v take it while the canary waits, want none", got)
	}
	took(r, canary, 0, Succeeded, t0.Add(time.Minute))
	if got := takers(t, r, nodes, t0.Add(time.Hour)); len(got) != 0 {
		t.Fatalf("%v take it before a promotion (manual), want none", got)
	}
	r.Spec.Promoted = 1
	got := takers(t, r, nodes, t0.Add(time.Hour))
	if len(got) != 4 || strings.Contains(strings.Join(got, ","), canary) {
		t.Fatalf("%v take stage 1, want the 4 nodes other than %s", got, canary)
	}
	st, err := Summarize(r, nodes, Room{}, t0.Add(time.Hour), nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Stage != 1 || st.Counts.Succeeded != 1 || st.Counts.Selected != 5 {
		t.Fatalf("summary: stage %d, counts %+v", st.Stage, st.Counts)
	}
	want := []StageStatus{{Stage: 0, Reaches: "1 node", Nodes: 1, Took: 1, Succeeded: 1, State: StageSucceeded},
		{Stage: 1, Reaches: "all", Nodes: 5, State: StageOpen}}
	if fmt.Sprint(st.Stages) != fmt.Sprint(want) {
		t.Fatalf("stages %+v, want %+v", st.Stages, want)
	}
}

// Another rollout has another canary: the order is the rollout's own.
func TestRankDiffersByRollout(t *testing.T) {
	nodes := fleet(20)
	seen := map[string]bool{}
	for i := 0; i < 10; i++ {
		r := newRollout(nil)
		r.UID = types.UID(fmt.Sprint("uid-", i))
		got := takers(t, r, nodes, t0)
		if len(got) != 1 {
			t.Fatalf("rollout %d: %v take the first stage", i, got)
		}
		seen[got[0]] = true
	}
	if len(seen) < 3 {
		t.Fatalf("10 rollouts chose only %d canaries: %v", len(seen), seen)
	}
}

// A count stage never hands out more places than its count, skips nodes
// whose hosts run no rollouts, and counts the nodes that took it in
// earlier stages.
func TestDecideCountStages(t *testing.T) {
	nodes := fleet(9)
	delete(nodes[0].Labels, LabelRollouts)
	delete(nodes[1].Labels, LabelRollouts)
	r := newRollout(func(s *Spec) { s.Stages = []Stage{{Nodes: intp(2)}, {Percent: intp(50)}, {All: true}} })
	first := takers(t, r, nodes, t0)
	if len(first) != 2 {
		t.Fatalf("%v take a 2-node stage", first)
	}
	for _, n := range first {
		if n == "n1" || n == "n2" {
			t.Fatalf("%s took it: its host runs no rollouts", n)
		}
	}
	took(r, first[0], 0, Succeeded, t0)
	if got := takers(t, r, nodes, t0); len(got) != 1 || got[0] != first[1] {
		t.Fatalf("after %s took its place, %v take it, want only %s", first[0], got, first[1])
	}
	took(r, first[1], 0, Succeeded, t0)
	r.Spec.Promoted = 1
	// 50 % of the 7 nodes whose hosts run rollouts: 4, of which 2 took it.
	if got := takers(t, r, nodes, t0); len(got) != 2 {
		t.Fatalf("%v take the 50%% stage with 2 of 4 places taken", got)
	}
	st, err := Summarize(r, nodes, Room{}, t0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Counts.Selected != 7 || st.Counts.Disabled != 2 {
		t.Fatalf("counts %+v, want 7 selected and 2 disabled", st.Counts)
	}
}

// A selector stage reaches the nodes it selects, and a node created later
// that matches takes it too, unless newNodes is false.
func TestDecideSelectorAndNewNodes(t *testing.T) {
	nodes := fleet(4)
	zoneA := &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}
	r := newRollout(func(s *Spec) { s.Stages = []Stage{{Selector: zoneA}, {All: true}} })
	if got := strings.Join(takers(t, r, nodes, t0), ","); got != "n1,n3" {
		t.Fatalf("%s take the zone-a stage, want n1,n3", got)
	}
	late := NodeFacts{Name: "n9", Created: t0.Add(time.Hour), Labels: map[string]string{LabelRollouts: "enabled", "zone": "a"}}
	nodes = append(nodes, late)
	if v, _ := Decide(r, "n9", nodes, Room{}, t0.Add(2*time.Hour), nil, nil); !v.Take {
		t.Fatalf("a node that joined later does not take it: %s", v.Why)
	}
	no := false
	r.Spec.NewNodes = &no
	if v, _ := Decide(r, "n9", nodes, Room{}, t0.Add(2*time.Hour), nil, nil); v.Take {
		t.Fatal("a node that joined later takes it with newNodes: false")
	}
}

// A failure stops the rollout: no node takes it any more, and the summary
// says which node failed; a new revision (a changed script) starts over.
func TestDecideStopsAtAFailure(t *testing.T) {
	nodes := fleet(4)
	r := newRollout(func(s *Spec) { s.Stages = []Stage{{All: true}} })
	took(r, "n1", 0, Succeeded, t0)
	took(r, "n2", 0, RolledBack, t0.Add(time.Minute))
	r.Status.Nodes[1].Message = "exit 3: dpkg: error"
	if got := takers(t, r, nodes, t0.Add(time.Hour)); len(got) != 0 {
		t.Fatalf("%v take a stopped rollout", got)
	}
	st, _ := Summarize(r, nodes, Room{}, t0.Add(time.Hour), nil)
	if st.FirstFailure == nil || st.FirstFailure.Name != "n2" || !hasCond(st, ConditionFailed, metav1.ConditionTrue) || !hasCond(st, ConditionComplete, metav1.ConditionFalse) {
		t.Fatalf("summary of a stopped rollout: %+v", st)
	}
	r.Spec.Script = Source{Inline: "fixed\n", SHA256: SHA256([]byte("fixed\n"))}
	if got := takers(t, r, nodes, t0.Add(time.Hour)); len(got) != 4 {
		t.Fatalf("%v take the new revision, want every node again", got)
	}
}

// Automatic promotion opens the next stage once the stage succeeded and
// the soak has passed since the agent saw it succeed: its own observation,
// not the finish time in the entries, which the nodes write.
func TestAutoPromotionAfterTheSoak(t *testing.T) {
	const soak = 10 * time.Minute
	forged := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name     string
		finished time.Time // the canary's entry says
		seen     Seen      // the agents saw stage 0 succeed
		// opens is when stage 1 opens; the nodes check at 5m, just
		// before and at it.
		opens time.Time
	}{
		{"honest: the soak from when it was seen", t0.Add(time.Minute), Seen{0: t0.Add(time.Minute)}, t0.Add(time.Minute + soak)},
		{"finished 2000-01-01 ends no soak", forged, Seen{0: t0.Add(time.Minute)}, t0.Add(time.Minute + soak)},
		{"an agent that saw it later waits longer", t0.Add(time.Minute), Seen{0: t0.Add(30 * time.Minute)}, t0.Add(30*time.Minute + soak)},
	} {
		t.Run(c.name, func(t *testing.T) {
			nodes := fleet(3)
			r := newRollout(func(s *Spec) {
				s.Promotion = Promotion{Mode: PromotionAuto, Soak: &metav1.Duration{Duration: soak}}
			})
			canary := takers(t, r, nodes, t0)[0]
			took(r, canary, 0, Succeeded, c.finished)
			for _, at := range []time.Time{t0.Add(5 * time.Minute), c.opens.Add(-time.Second)} {
				v, _ := Decide(r, otherThan(nodes, canary), nodes, Room{}, at, c.seen, nil)
				if v.Take || !v.WakeAt.Equal(c.opens) {
					t.Fatalf("at %v, during the soak: take %v, wake at %v, want no and %v", at, v.Take, v.WakeAt, c.opens)
				}
				st, _ := Summarize(r, nodes, Room{}, at, c.seen)
				if p := cond(st, ConditionProgressing); p == nil || p.Reason != "Soaking" || st.Stage != 0 {
					t.Fatalf("at %v, during the soak, stage %d, Progressing is %+v", at, st.Stage, p)
				}
			}
			if got := takersSeen(t, r, nodes, c.opens, c.seen); len(got) != 2 {
				t.Fatalf("%v take it after the soak, want the other 2", got)
			}
			for _, n := range nodes {
				took(r, n.Name, 1, Succeeded, c.opens.Add(time.Minute))
			}
			took(r, canary, 0, Succeeded, c.finished)
			st, _ := Summarize(r, nodes, Room{}, c.opens.Add(time.Hour), c.seen)
			if !hasCond(st, ConditionComplete, metav1.ConditionTrue) || st.Stage != 1 {
				t.Fatalf("a rollout every node finished is not Complete: %+v", st.Conditions)
			}
		})
	}
}

// A stage no agent saw succeed before soaks from now; kustodian-ctl, which
// sees nothing itself, estimates the soak from the entries and says so.
func TestSoakNotSeenAndEstimated(t *testing.T) {
	nodes := fleet(3)
	r := newRollout(func(s *Spec) {
		s.Promotion = Promotion{Mode: PromotionAuto, Soak: &metav1.Duration{Duration: 10 * time.Minute}}
	})
	canary := takers(t, r, nodes, t0)[0]
	took(r, canary, 0, Succeeded, t0.Add(time.Minute))
	now := t0.Add(time.Hour)
	if v, _ := Decide(r, otherThan(nodes, canary), nodes, Room{}, now, Seen{}, nil); v.Take || !v.WakeAt.Equal(now.Add(10*time.Minute)) {
		t.Fatalf("not seen before: take %v, wake at %v, want no and the soak from now", v.Take, v.WakeAt)
	}
	look, _ := Observe(r, nodes, canary)
	if stages := look.Succeeded; !slices.Equal(stages, []int{0}) {
		t.Fatalf("succeeded stages %v, want [0]", stages)
	}
	est, _ := Estimate(r, nodes)
	st, _ := Summarize(r, nodes, Room{}, t0.Add(5*time.Minute), est)
	if c := cond(st, ConditionProgressing); c == nil || !strings.Contains(c.Message, "the next opens at about 2026-11-26T02:11:00Z") {
		t.Fatalf("the estimate during the soak: %+v", c)
	}
}

// kustodian-ctl rollout promote opens the stage after the one open now as
// far as it can be sure: a canary that wrote it finished long ago has its
// stage still soaking, so promote opens stage 1, never stage 2.
func TestOpenSurelyTakesNoSoakAsPassed(t *testing.T) {
	nodes := fleet(4)
	r := newRollout(func(s *Spec) {
		s.Stages = []Stage{{Nodes: intp(1)}, {Nodes: intp(2)}, {All: true}}
		s.Promotion = Promotion{Mode: PromotionAuto, Soak: &metav1.Duration{Duration: time.Hour}}
	})
	canary := takers(t, r, nodes, t0)[0]
	took(r, canary, 0, Succeeded, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	est, _ := Estimate(r, nodes)
	if st, _ := Summarize(r, nodes, Room{}, t0, est); st.Stage != 1 {
		t.Fatalf("the estimate from the finish times has stage %d open, want 1 (the soak passed by them)", st.Stage)
	}
	if o, err := OpenSurely(r, nodes, t0); err != nil || o != 0 {
		t.Fatalf("surely open: %d, %v; want stage 0 (its soak not taken as passed)", o, err)
	}
	r.Spec.Promotion.Soak = nil
	if o, _ := OpenSurely(r, nodes, t0); o != 1 {
		t.Fatalf("without a soak, surely open: %d, want 1", o)
	}
}

// Paused and aborted rollouts are taken by no node.
func TestDecidePausedAndAborted(t *testing.T) {
	nodes := fleet(2)
	for name, change := range map[string]func(*Spec){
		"paused":  func(s *Spec) { s.Paused = true },
		"aborted": func(s *Spec) { s.Aborted = true },
	} {
		r := newRollout(change)
		if got := takers(t, r, nodes, t0); len(got) != 0 {
			t.Errorf("%s: %v take it", name, got)
		}
		v, _ := Decide(r, "n1", nodes, Room{}, t0, nil, nil)
		if !strings.Contains(v.Why, name) {
			t.Errorf("%s: says %q", name, v.Why)
		}
	}
}

func otherThan(nodes []NodeFacts, name string) string {
	for _, n := range nodes {
		if n.Name != name {
			return n.Name
		}
	}
	return ""
}

func cond(st Status, t string) *metav1.Condition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

func hasCond(st Status, t string, s metav1.ConditionStatus) bool {
	c := cond(st, t)
	return c != nil && c.Status == s
}

// A host that refuses a rollout (a bad signature, a key it does not
// trust) says so as a failure, but does not stop the others: each host
// checks for itself.
func TestARefusalStopsNoOtherNode(t *testing.T) {
	nodes := fleet(3)
	r := newRollout(func(s *Spec) { s.Stages = []Stage{{All: true}} })
	took(r, "n1", 0, Refused, t0)
	if got := takers(t, r, nodes, t0); len(got) != 2 {
		t.Fatalf("%v take it after n1 refused, want the other 2", got)
	}
	st, _ := Summarize(r, nodes, Room{}, t0, nil)
	if st.FirstFailure == nil || st.FirstFailure.Name != "n1" || !hasCond(st, ConditionFailed, metav1.ConditionTrue) || st.Counts.Refused != 1 {
		t.Fatalf("a refusal is not reported as a failure: %+v", st)
	}
	if c := cond(st, ConditionProgressing); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Progressing after a refusal: %+v", c)
	}
}

// A node that retries holds new nodes back but not those queued; a final
// failure, a pause or an abort withdraws them too.
func TestWithdrawn(t *testing.T) {
	r := newRollout(func(s *Spec) { s.Stages = []Stage{{All: true}} })
	took(r, "n1", 0, Retrying, time.Time{})
	took(r, "n2", 0, Waiting, time.Time{})
	if why := Withdrawn(r, fleet(3)); why != "" {
		t.Errorf("while n1 retries, queued nodes withdraw: %s", why)
	}
	if why := Halted(r, fleet(3)); why == "" {
		t.Error("while n1 retries, new nodes may start it")
	}
	took(r, "n1", 0, RolledBack, t0)
	if why := Withdrawn(r, fleet(3)); !strings.Contains(why, "n1 is RolledBack") {
		t.Errorf("after n1 failed for good: %q", why)
	}
	r = newRollout(func(s *Spec) { s.Paused = true })
	if why := Withdrawn(r, fleet(3)); why != "the rollout is paused" {
		t.Errorf("paused: %q", why)
	}
}
