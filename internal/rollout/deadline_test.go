package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/policy"
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
	v, _ := Decide(r, "n3", nodes, Room{}, t0, nil, nil)
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
		p, err := PaceOf(r, nodes, Room{}, t0)
		if err != nil {
			t.Fatal(err)
		}
		if p.Limit != c.limit || p.AtRisk != c.atRisk || !p.PredictedEnd.Equal(t0.Add(c.end)) || p.Left != 6 {
			t.Errorf("%s: pace %+v, want %d at once, at risk %v, predicted end +%s", c.what, p, c.limit, c.atRisk, c.end)
		}
		if got := takers(t, r, nodes, t0); len(got) != 6 {
			t.Errorf("%s: %v may take it with none in it, want all 6 (each claim's write admits one)", c.what, got)
		}
		st, err := Summarize(r, nodes, Room{}, t0, nil)
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
	p, _ := PaceOf(r, nodes, Room{}, t0)
	// 4 left (n3 in it, n4-n6): 2 at once, 2 rounds of 4 minutes.
	if p.Takes != 4*time.Minute || p.Left != 4 || p.InFlight != 1 || p.Limit != 2 || !p.PredictedEnd.Equal(t0.Add(8*time.Minute)) {
		t.Errorf("after two nodes took 2 and 4 minutes: pace %+v, want 4m each, 4 left, 2 at once, end +8m", p)
	}
	if got := takers(t, r, nodes, t0); len(got) != 3 {
		t.Errorf("pace 2 with 1 in it: %v may take it, want n4-n6", got)
	}
	// No deadline: no AtRisk condition.
	st, _ := Summarize(newRollout(all), nodes, Room{}, t0, nil)
	if cond(st, ConditionAtRisk) != nil {
		t.Error("a rollout without a deadline has an AtRisk condition")
	}
}

// The pace predicts in the room the policy gives: a round starts only
// while a window is open, and no more nodes run at once than its slots.
// Windows 02:00-03:00 and 04:00-05:00, now 02:30, four nodes left at 30
// minutes each, deadline 04:50: counted without the windows, one at a
// time ends at 04:30; in them, one at a time runs 02:30-03:00,
// 04:00-04:30, 04:30-05:00 and misses it, two at once end at 04:30. A
// node queued before a window opened took the time from the opening.
func TestThePaceCountsOnlyTheTimeThePolicysWindowsGive(t *testing.T) {
	nodes := fleet(6)
	now := t0.Add(30 * time.Minute)
	deadline := metav1.NewTime(time.Date(2026, 11, 26, 4, 50, 0, 0, time.UTC))
	r := newRollout(func(s *Spec) { s.Stages = []Stage{{All: true}}; s.Deadline = &deadline })
	for _, name := range []string{"n1", "n2"} {
		took(r, name, 0, Succeeded, now)
		started := metav1.NewTime(now.Add(-30 * time.Minute))
		r.Entry(name).Started = &started
	}
	windows, err := policy.ParseSchedule([]policy.Window{{Start: "02:00", End: "03:00"}, {Start: "04:00", End: "05:00"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := func(h, m int) time.Time { return time.Date(2026, 11, 26, h, m, 0, 0, time.UTC) }
	for _, c := range []struct {
		what   string
		room   Room
		limit  int
		atRisk bool
		end    time.Time
		bound  string
		reason string
	}{
		{"always open", Room{}, 1, false, at(4, 30), "", "OnTime"},
		{"in the windows", Room{Windows: windows}, 2, true, at(4, 30), "", "PaceRaised"},
		{"in the windows, two slots", Room{Windows: windows, Slots: 2}, 2, true, at(4, 30), "", "PaceRaised"},
		// One slot: no more than one at a time, and no more queued (their
		// wait would count as time taken).
		{"in the windows, one slot", Room{Windows: windows, Slots: 1}, 1, true, at(2, 30).Add(24 * time.Hour), "the policy's concurrency", "DeadlineMissed"},
	} {
		p, err := PaceOf(r, nodes, c.room, now)
		if err != nil {
			t.Fatal(err)
		}
		if p.Limit != c.limit || p.AtRisk != c.atRisk || !p.PredictedEnd.Equal(c.end) || p.Bound != c.bound || p.Left != 4 || p.Takes != 30*time.Minute {
			t.Errorf("%s: pace %+v, want %d at once, at risk %v, predicted end %s, bound %q", c.what, p, c.limit, c.atRisk, c.end, c.bound)
		}
		st, err := Summarize(r, nodes, c.room, now, nil)
		if err != nil {
			t.Fatal(err)
		}
		if cd := cond(st, ConditionAtRisk); cd == nil || cd.Reason != c.reason {
			t.Errorf("%s: condition AtRisk %+v, want reason %s", c.what, cd, c.reason)
		} else if c.bound != "" && !strings.Contains(cd.Message, "even with one node at a time (the policy's concurrency)") {
			t.Errorf("%s: condition AtRisk says %q, want the policy's one slot named", c.what, cd.Message)
		}
	}
	// n2 queued at 01:00, an hour before the window opened: it took 30
	// minutes in the windows, 90 without them.
	queued := metav1.NewTime(t0.Add(-time.Hour))
	r.Entry("n2").Started = &queued
	for what, c := range map[string]struct {
		room Room
		want time.Duration
	}{"in the windows": {Room{Windows: windows}, 30 * time.Minute}, "always open": {Room{}, 90 * time.Minute}} {
		if p, _ := PaceOf(r, nodes, c.room, now); p.Takes != c.want {
			t.Errorf("a node queued an hour before the window opened, %s: each node takes %s, want %s", what, p.Takes, c.want)
		}
	}
}
