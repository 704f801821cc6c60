package decide

import (
	"errors"
	"strings"
	"testing"
)

// Each situation of a Draining node leads to one step.
func TestDrainNext(t *testing.T) {
	base := DrainFacts{NodeExists: true, Request: "r2"}
	with := func(change func(*DrainFacts)) DrainFacts {
		f := base
		change(&f)
		return f
	}
	failed := errors.New("pods left: db-0")
	for _, tc := range []struct {
		name    string
		facts   DrainFacts
		do      DrainDo
		publish bool
		says    string // in the message or the reason
	}{
		{"no Node: keep the lock", with(func(f *DrainFacts) { f.NodeExists = false }), DrainNoNode, false, "Node does not exist"},
		{"Kured holds its lock: give back", with(func(f *DrainFacts) { f.KuredRefused = "Kured's lock is held by n9" }), DrainGiveBack, true, "giving the node back: Kured's lock is held by n9"},
		{"Kured wins even mid-drain", with(func(f *DrainFacts) {
			f.KuredRefused, f.CordonedByUs, f.Drain = "held by n9", true, &DrainRun{Request: "r2"}
		}), DrainGiveBack, true, "held by n9"},
		{"overbooked: give back", with(func(f *DrainFacts) { f.Overbooked = "2 of 1 allowed nodes unavailable" }), DrainGiveBack, false, "maxUnavailable is reached: 2 of 1"},
		{"no drain yet: start", base, DrainStart, true, "cordoned; draining"},
		{"a drain for an older request: start anew", with(func(f *DrainFacts) { f.Drain = &DrainRun{Request: "r1", Done: true} }), DrainStart, true, "cordoned; draining"},
		{"running: report", with(func(f *DrainFacts) { f.Drain = &DrainRun{Request: "r2", Progress: "draining: 3 pods left"} }), DrainWait, true, "cordoned; draining: 3 pods left"},
		{"running, no progress yet", with(func(f *DrainFacts) { f.Drain = &DrainRun{Request: "r2"} }), DrainWait, true, "cordoned; draining"},
		{"drained", with(func(f *DrainFacts) { f.Drain = &DrainRun{Request: "r2", Done: true} }), DrainDrained, false, ""},
		{"failed: hold", with(func(f *DrainFacts) { f.Drain = &DrainRun{Request: "r2", Done: true, Err: failed} }), DrainHold, false, "drain failed: pods left: db-0; the lock and the cordon are held"},
		{"timed out, hold", with(func(f *DrainFacts) { f.Drain = &DrainRun{Request: "r2", Done: true, Err: failed, TimedOut: true} }), DrainHold, false, "are held"},
		{"timed out, release: queue again", with(func(f *DrainFacts) {
			f.Drain, f.ReleaseOnTimeout = &DrainRun{Request: "r2", Done: true, Err: failed, TimedOut: true}, true
		}), DrainRequeue, false, "given back and queues again"},
		{"timed out, quarantine with room", with(func(f *DrainFacts) {
			f.Drain, f.Quarantine, f.ReleaseOnTimeout = &DrainRun{Request: "r2", Done: true, Err: failed, TimedOut: true}, true, true
		}), DrainQuarantine, false, "quarantined: it stays cordoned"},
		{"timed out, quarantine full: hold, the rollout stops", with(func(f *DrainFacts) {
			f.Drain, f.Quarantine, f.QuarantineFull = &DrainRun{Request: "r2", Done: true, Err: failed, TimedOut: true}, true, "1 of 1 nodes quarantined: n7"
		}), DrainHold, false, "not quarantined: 1 of 1 nodes quarantined: n7"},
		{"failed otherwise, quarantine: still hold", with(func(f *DrainFacts) {
			f.Drain, f.Quarantine = &DrainRun{Request: "r2", Done: true, Err: failed}, true
		}), DrainHold, false, "are held"},
		{"failed otherwise, release: still hold", with(func(f *DrainFacts) {
			f.Drain, f.ReleaseOnTimeout = &DrainRun{Request: "r2", Done: true, Err: failed}, true
		}), DrainHold, false, "are held"},
	} {
		s := DrainNext(tc.facts)
		if s.Do != tc.do || s.Publish != tc.publish || !strings.Contains(s.Message+" | "+s.Why, tc.says) {
			t.Errorf("%s: %+v, want do %d publish %v saying %q", tc.name, s, tc.do, tc.publish, tc.says)
		}
	}
}

// The overbooking check is made once, before the cordon and the drain; not
// when Kured's lock already sends the node back, nor once it is cordoned.
func TestCheckOverbooking(t *testing.T) {
	for _, tc := range []struct {
		f    DrainFacts
		want bool
	}{
		{DrainFacts{NodeExists: true}, true},
		{DrainFacts{NodeExists: true, CordonedByUs: true}, false},
		{DrainFacts{NodeExists: true, Drain: &DrainRun{}}, false},
		{DrainFacts{NodeExists: true, KuredRefused: "held"}, false},
		{DrainFacts{}, false},
	} {
		if got := CheckOverbooking(tc.f); got != tc.want {
			t.Errorf("CheckOverbooking(%+v) = %v", tc.f, got)
		}
	}
}
