package decide

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/policy"
	"k8s.io/apimachinery/pkg/util/intstr"
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
		if got := checkOverbooking(tc.f); got != tc.want {
			t.Errorf("checkOverbooking(%+v) = %v", tc.f, got)
		}
	}
}

// A Draining node's decision asks for what it must look up, in the order
// the agent used to look it up: Kured's lock first, then (only when they
// matter) the quarantined nodes and the policy's maxUnavailable; then it
// gives the step.
func TestDrainingLooksUpThenSteps(t *testing.T) {
	str := func(s string) *string { return &s }
	base := snap(withPolicy(func(p *policy.Spec) {
		p.Health.MaxUnavailable = ptr(intstr.FromInt32(1))
		p.Drain.Quarantine = &policy.Quarantine{}
	}), func(s *Snapshot) { s.Locks["lock-p-0"] = heldIn("lock-p-0", "me", lock.GroupRef{Policy: "p"}) })
	d := next(base)
	if d.State != lock.Draining || !d.Need.Kured || d.Need.Overbooking || d.Need.Quarantine {
		t.Fatalf("first: state %s need %+v, want Kured's lock alone", d.State, d.Need)
	}
	s := base
	s.DrainLookups.KuredRefused = str("")
	if d := next(s); !d.Need.Overbooking || d.Need.Quarantine || d.Need.Kured {
		t.Fatalf("Kured's lock held, not cordoned yet: need %+v, want the overbooking check alone", d.Need)
	}
	s.DrainLookups.Overbooked = str("")
	if d := next(s); !d.Need.Empty() || d.Drain.Do != DrainStart {
		t.Fatalf("looked up: need %+v step %v, want DrainStart", d.Need, d.Drain.Do)
	}
	s.DrainLookups.Overbooked = str("2 of 1 allowed nodes unavailable: b took its lock first")
	if d := next(s); d.Drain.Do != DrainGiveBack {
		t.Fatalf("overbooked: step %v, want DrainGiveBack", d.Drain.Do)
	}
	timedOut := base
	timedOut.DrainLookups.KuredRefused = str("")
	timedOut.Drain = &DrainRun{Request: "r1", Done: true, Err: fmt.Errorf("pods would not go"), TimedOut: true}
	d = next(timedOut)
	if !d.Need.Quarantine || d.Need.Overbooking {
		t.Fatalf("timed out under a quarantining policy: need %+v, want the quarantined nodes counted alone", d.Need)
	}
	timedOut.DrainLookups.QuarantineFull = str("")
	if d := next(timedOut); d.Drain.Do != DrainQuarantine {
		t.Fatalf("room to quarantine: step %v", d.Drain.Do)
	}
	gone := base
	gone.Self = nil
	if d := next(gone); d.Need.Kured || d.Drain.Do != DrainNoNode {
		t.Fatalf("no Node: need %+v step %v, want DrainNoNode without Kured's lock", d.Need, d.Drain.Do)
	}
}
