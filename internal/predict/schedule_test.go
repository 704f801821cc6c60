package predict

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// daily is a window open every day from `from` to `to` (minutes after
// midnight, UTC), written here rather than taken from package policy.
func daily(from, to int) Window {
	return func(t time.Time) (bool, time.Time) {
		day := t.Truncate(24 * time.Hour)
		open, close := day.Add(time.Duration(from)*time.Minute), day.Add(time.Duration(to)*time.Minute)
		switch {
		case t.Before(open):
			return false, open
		case t.Before(close):
			return true, close
		}
		return false, open.Add(24 * time.Hour)
	}
}

func never(time.Time) (bool, time.Time) { return false, time.Time{} }

func minutes(ds map[string]float64) func(string) Estimate {
	return func(n string) Estimate {
		return Estimate{Duration: time.Duration(ds[n] * float64(time.Minute)), Source: SourceNode}
	}
}

// at is t0 plus m minutes.
func at(m float64) time.Time { return t0.Add(time.Duration(m * float64(time.Minute))) }

type placed struct {
	node       string
	slot       int
	start, end float64 // minutes after t0
	deferred   string
}

func TestMake(t *testing.T) {
	cases := []struct {
		name     string
		in       Input
		want     []placed
		makespan time.Duration
		unplaced []string
	}{{
		name: "one slot, a handoff between nodes",
		in: Input{Now: t0, Handoff: 30 * time.Second, Estimate: minutes(map[string]float64{"a": 10, "b": 10, "c": 10}),
			Groups: []Group{{Name: "p", Slots: 1, Queue: []string{"a", "b", "c"}}}},
		want:     []placed{{"a", 0, 0, 10, ""}, {"b", 0, 10.5, 20.5, ""}, {"c", 0, 21, 31, ""}},
		makespan: 31 * time.Minute,
	}, {
		name: "a node in maintenance keeps its slot until its estimate ends",
		in: Input{Now: t0, Estimate: minutes(map[string]float64{"busy": 10, "a": 4}),
			Groups: []Group{{Slots: 1, Busy: []Busy{{Node: "busy", Started: at(-6), Slot: 0}}, Queue: []string{"a"}}}},
		want:     []placed{{"busy", 0, -6, 4, ""}, {"a", 0, 4, 8, ""}},
		makespan: 8 * time.Minute,
	}, {
		name: "an overdue node ends now, as far as anyone can tell",
		in: Input{Now: t0, Estimate: minutes(map[string]float64{"busy": 10, "a": 4}),
			Groups: []Group{{Slots: 1, Busy: []Busy{{Node: "busy", Started: at(-30), Slot: 0}}, Queue: []string{"a"}}}},
		want:     []placed{{"busy", 0, -30, 0, ""}, {"a", 0, 0, 4, ""}},
		makespan: 4 * time.Minute,
	}, {
		name: "two slots: the next node takes the slot that frees first",
		in: Input{Now: t0, Estimate: minutes(map[string]float64{"a": 10, "b": 20, "c": 5, "d": 5}),
			Groups: []Group{{Slots: 2, Locks: []string{"lock-0", "lock-1"}, Queue: []string{"a", "b", "c", "d"}}}},
		want:     []placed{{"a", 0, 0, 10, ""}, {"b", 1, 0, 20, ""}, {"c", 0, 10, 15, ""}, {"d", 0, 15, 20, ""}},
		makespan: 20 * time.Minute,
	}, {
		name: "spacing from the group's last release, the one before the rollout included",
		in: Input{Now: t0, Estimate: minutes(map[string]float64{"a": 10, "b": 10}),
			Groups: []Group{{Slots: 1, Spacing: 5 * time.Minute, LastRelease: at(-2), Queue: []string{"a", "b"}}}},
		want:     []placed{{"a", 0, 3, 13, "spacing"}, {"b", 0, 18, 28, "spacing"}},
		makespan: 28 * time.Minute,
	}, {
		name: "groups go side by side",
		in: Input{Now: t0, Estimate: minutes(map[string]float64{"a": 10, "b": 10, "x": 3}),
			Groups: []Group{{Name: "g1", Slots: 1, Queue: []string{"a", "b"}}, {Name: "g2", Slots: 1, Queue: []string{"x"}}}},
		want:     []placed{{"a", 0, 0, 10, ""}, {"x", 0, 0, 3, ""}, {"b", 0, 10, 20, ""}},
		makespan: 20 * time.Minute,
	}, {
		name: "a start after the window's close waits for its next opening",
		in: Input{Now: t0, Estimate: minutes(map[string]float64{"a": 25, "b": 25, "c": 25, "d": 25}),
			Groups: []Group{{Slots: 1, Window: daily(22*60, 23*60), Queue: []string{"a", "b", "c", "d"}}}},
		want:     []placed{{"a", 0, 0, 25, ""}, {"b", 0, 25, 50, ""}, {"c", 0, 50, 75, ""}, {"d", 0, 24 * 60, 24*60 + 25, "window"}},
		makespan: (24*60 + 25) * time.Minute,
	}, {
		name: "a plan's later start holds the nodes it adds, not those queued already",
		in: Input{Now: t0, Start: at(60), Estimate: minutes(map[string]float64{"q": 10, "a": 10, "b": 10}),
			NotBefore: map[string]time.Time{"a": at(60), "b": at(60)},
			Groups:    []Group{{Slots: 1, Queue: []string{"q", "a", "b"}}}},
		want:     []placed{{"q", 0, 0, 10, ""}, {"a", 0, 60, 70, "start"}, {"b", 0, 70, 80, ""}},
		makespan: 20 * time.Minute,
	}, {
		name: "a window that never opens places nothing",
		in: Input{Now: t0, Estimate: minutes(map[string]float64{"a": 10}),
			Groups: []Group{{Slots: 1, Window: never, Queue: []string{"a"}}}},
		unplaced: []string{"a"},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := Make(c.in)
			var got []placed
			for _, e := range s.Entries {
				got = append(got, placed{e.Node, e.Slot, e.Start.Sub(t0).Minutes(), e.End.Sub(t0).Minutes(), e.Deferred})
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("entries:\n got %v\nwant %v", got, c.want)
			}
			if s.Makespan() != c.makespan {
				t.Errorf("makespan %v, want %v", s.Makespan(), c.makespan)
			}
			var unplaced []string
			for _, u := range s.Unplaced {
				unplaced = append(unplaced, u.Node)
			}
			if !slices.Equal(unplaced, c.unplaced) {
				t.Errorf("unplaced %v, want %v", unplaced, c.unplaced)
			}
		})
	}
}

func TestMakeHolders(t *testing.T) {
	est := minutes(map[string]float64{"failed": 10, "late": 10, "x": 5, "y": 5, "a": 10, "b": 30})
	// A failed node keeps its slot: with one slot nobody goes; with two the
	// queue uses the other.
	one := Make(Input{Now: t0, Estimate: est, Groups: []Group{{Slots: 1, Busy: []Busy{{Node: "failed", Started: at(-60), Slot: 0, Stuck: true}}, Queue: []string{"x", "y"}}}})
	if len(one.Unplaced) != 2 || !strings.Contains(one.Unplaced[0].Why, "failed") || one.End != t0 {
		t.Errorf("one slot held by a failed node: unplaced %+v, end %v; want x and y unplaced, naming it, and nothing ending", one.Unplaced, one.End)
	}
	two := Make(Input{Now: t0, Estimate: est, Groups: []Group{{Slots: 2, Busy: []Busy{{Node: "failed", Started: at(-60), Slot: 0, Stuck: true}}, Queue: []string{"x", "y"}}}})
	if len(two.Unplaced) != 0 || two.End != at(10) {
		t.Errorf("two slots, one held by a failed node: unplaced %+v, end %v; want x then y on the other, ending at 10", two.Unplaced, two.End)
	}
	// An overdue node: those behind it get the earliest they can go.
	late := Make(Input{Now: t0, Estimate: est, Groups: []Group{{Slots: 1, Busy: []Busy{{Node: "late", Started: at(-60), Slot: 0}}, Queue: []string{"x"}}}})
	for _, e := range late.Entries {
		if (e.Node == "late") != e.Overdue || (e.Node == "x") != e.Later {
			t.Errorf("%s: overdue %v, later %v", e.Node, e.Overdue, e.Later)
		}
	}
	// Concurrency lowered to 1 while two hold locks: the queue waits for
	// both.
	lowered := Make(Input{Now: t0, Estimate: est, Groups: []Group{{Slots: 1, Busy: []Busy{{Node: "a", Started: t0, Slot: 0}, {Node: "b", Started: t0, Slot: 1}}, Queue: []string{"x"}}}})
	for _, e := range lowered.Entries {
		if e.Node == "x" && !e.Start.Equal(at(30)) {
			t.Errorf("x starts at %v, want 30 (after b, which holds a lock beyond the one slot)", e.Start.Sub(t0))
		}
	}
}

// Found by a review: the release of an overdue holder counts for the
// spacing, and a holder of a lock beyond the slots takes the slot that frees
// first (the agents count it against the free locks).
func TestMakeOverdueSpacingAndExtraHolder(t *testing.T) {
	est := minutes(map[string]float64{"late": 10, "x": 5, "a": 30, "b": 20})
	s := Make(Input{Now: t0, Estimate: est, Groups: []Group{{Slots: 1, Spacing: 10 * time.Minute,
		Busy: []Busy{{Node: "late", Started: at(-60), Slot: 0}}, Queue: []string{"x"}}}})
	for _, e := range s.Entries {
		if e.Node == "x" && (!e.Start.Equal(at(10)) || e.Deferred != "spacing") {
			t.Errorf("x after an overdue holder with 10m spacing: starts %v (%s), want 10 (spacing)", e.Start.Sub(t0), e.Deferred)
		}
	}
	s = Make(Input{Now: t0, Estimate: est, Groups: []Group{{Slots: 2, Locks: []string{"lock-0", "lock-1"},
		Busy: []Busy{{Node: "a", Started: t0, Slot: 0, Lock: "lock-0"}, {Node: "b", Started: t0, Slot: -1, Lock: "lock-5"}}, Queue: []string{"x"}}}})
	for _, e := range s.Entries {
		switch {
		case e.Node == "x" && !e.Start.Equal(at(20)):
			t.Errorf("x starts at %v, want 20 (when b, on a lock beyond the two slots, releases)", e.Start.Sub(t0))
		case e.Node == "b" && e.Lock != "lock-5":
			t.Errorf("b's lock %q, want the one it holds, lock-5", e.Lock)
		}
	}
}

func TestMakeNamesTheLock(t *testing.T) {
	s := Make(Input{Now: t0, Estimate: minutes(map[string]float64{"a": 1, "b": 1}),
		Groups: []Group{{Slots: 2, Locks: []string{"lock-0", "lock-1"}, Busy: []Busy{{Node: "a", Started: t0, Slot: 1}}, Queue: []string{"b"}}}})
	got := map[string]string{}
	for _, e := range s.Entries {
		got[e.Node] = e.Lock
	}
	if got["a"] != "lock-1" || got["b"] != "lock-0" {
		t.Errorf("locks %v, want a on lock-1 (the one it holds), b on the free lock-0", got)
	}
}

func TestFitIn(t *testing.T) {
	w := daily(22*60, 23*60) // t0 is 22:00
	est := minutes(map[string]float64{"a": 25, "b": 25, "c": 25, "d": 25, "short": 5})
	over := Make(Input{Now: t0, Estimate: est, Groups: []Group{{Slots: 1, Window: w, Queue: []string{"a", "b", "c", "d"}}}})
	f := over.FitIn(w)
	// c starts at 22:50, inside, and ends at 23:15; d waits a day.
	want := Fit{Closes: at(60), FirstLate: "c", Over: 15 * time.Minute, Late: 2}
	if f != want {
		t.Errorf("too long for the window: %+v, want %+v", f, want)
	}
	fits := Make(Input{Now: t0, Estimate: est, Groups: []Group{{Slots: 1, Window: w, Queue: []string{"a", "b"}}}})
	if f := fits.FitIn(w); !f.Fits || f.Closes != at(60) || f.Late != 0 {
		t.Errorf("50 minutes in an hour: %+v, want it to fit", f)
	}
	// Planned in the afternoon: the window that counts is tonight's.
	later := Make(Input{Now: at(-8 * 60), Estimate: est, Groups: []Group{{Slots: 1, Window: w, Queue: []string{"short"}}}})
	if f := later.FitIn(w); !f.Fits || f.Closes != at(60) {
		t.Errorf("planned before the window: %+v, want it to fit in tonight's window", f)
	}
	if f := over.FitIn(nil); !f.Fits || !f.Closes.IsZero() {
		t.Errorf("no window: %+v, want it to fit", f)
	}
}
