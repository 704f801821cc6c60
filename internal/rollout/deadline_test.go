package rollout

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A rollout's own pace: without a deadline, maxConcurrency alone bounds
// how many of its nodes are in it at once; with one, it starts one node at
// a time and goes faster only as the deadline needs, never above
// maxConcurrency, and says when one at a time would miss it.
func TestADeadlineRaisesThePaceOnlyAsItNeeds(t *testing.T) {
	nodes := fleet(6)
	all := func(s *Spec) { s.Stages = []Stage{{All: true}} }
	at := func(d time.Duration) *metav1.Time { m := metav1.NewTime(t0.Add(d)); return &m }

	// No deadline, no maxConcurrency: every node of the open stage.
	if got := takers(t, newRollout(all), nodes, t0); len(got) != 6 {
		t.Errorf("no pace of its own: %v take it, want all 6", got)
	}
	// maxConcurrency 2, two in it already: no third.
	r := newRollout(func(s *Spec) { all(s); s.MaxConcurrency = intp(2) })
	took(r, "n1", 0, Waiting, time.Time{})
	took(r, "n2", 0, Running, time.Time{})
	if got := takers(t, r, nodes, t0); len(got) != 0 {
		t.Errorf("maxConcurrency 2 with 2 in it: %v take it, want none", got)
	}
	v, _ := Decide(r, "n3", nodes, t0, nil, nil)
	if !strings.Contains(v.Why, "2 of the rollout's nodes are in it") {
		t.Errorf("why n3 waits: %q", v.Why)
	}
	took(r, "n2", 0, Succeeded, t0)
	if got := takers(t, r, nodes, t0); len(got) != 4 {
		t.Errorf("maxConcurrency 2 with 1 in it: %v may take it, want the 4 left (the claim's write admits one)", got)
	}

	for _, c := range []struct {
		what     string
		deadline time.Duration
		max      *int
		limit    int
		atRisk   bool
		end      time.Duration
		reason   string
	}{
		// 6 nodes at 10 minutes each (none finished yet).
		{"a deadline one at a time meets", 2 * time.Hour, nil, 1, false, time.Hour, "OnTime"},
		{"a deadline that needs 3 at once", 25 * time.Minute, nil, 3, true, 20 * time.Minute, "PaceRaised"},
		{"a deadline that needs 6 at once", 10 * time.Minute, nil, 6, true, 10 * time.Minute, "PaceRaised"},
		{"a deadline missed even at maxConcurrency", 25 * time.Minute, intp(2), 2, true, 30 * time.Minute, "DeadlineMissed"},
	} {
		r := newRollout(func(s *Spec) { all(s); s.Deadline = at(c.deadline); s.MaxConcurrency = c.max })
		p, err := PaceOf(r, nodes, t0)
		if err != nil {
			t.Fatal(err)
		}
		if p.Limit != c.limit || p.AtRisk != c.atRisk || !p.PredictedEnd.Equal(t0.Add(c.end)) || p.Left != 6 {
			t.Errorf("%s: pace %+v, want %d at once, at risk %v, predicted end +%s", c.what, p, c.limit, c.atRisk, c.end)
		}
		if got := takers(t, r, nodes, t0); len(got) != 6 {
			t.Errorf("%s: %v may take it with none in it, want all 6 (each claim's write admits one)", c.what, got)
		}
		st, err := Summarize(r, nodes, t0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if cd := cond(st, ConditionAtRisk); cd == nil || cd.Reason != c.reason || (cd.Status == metav1.ConditionTrue) != c.atRisk {
			t.Errorf("%s: condition AtRisk %+v, want reason %s", c.what, cd, c.reason)
		}
	}

	// Nodes that finished: the pace follows the time they took (median of
	// 2 and 4 minutes: 4), and counts only the nodes left.
	r = newRollout(func(s *Spec) { all(s); s.Deadline = at(10 * time.Minute) })
	for i, d := range []time.Duration{2 * time.Minute, 4 * time.Minute} {
		name := []string{"n1", "n2"}[i]
		took(r, name, 0, Succeeded, t0)
		started := metav1.NewTime(t0.Add(-d))
		r.Status.Nodes[i].Started = &started
	}
	took(r, "n3", 0, Running, time.Time{})
	p, _ := PaceOf(r, nodes, t0)
	// 4 left (n3 in it, n4-n6): 2 at once, 2 rounds of 4 minutes.
	if p.Takes != 4*time.Minute || p.Left != 4 || p.InFlight != 1 || p.Limit != 2 || !p.PredictedEnd.Equal(t0.Add(8*time.Minute)) {
		t.Errorf("after two nodes took 2 and 4 minutes: pace %+v, want 4m each, 4 left, 2 at once, end +8m", p)
	}
	if got := takers(t, r, nodes, t0); len(got) != 3 {
		t.Errorf("pace 2 with 1 in it: %v may take it, want n4-n6", got)
	}
	// No deadline: no AtRisk condition.
	st, _ := Summarize(newRollout(all), nodes, t0, nil)
	if cond(st, ConditionAtRisk) != nil {
		t.Error("a rollout without a deadline has an AtRisk condition")
	}
}
