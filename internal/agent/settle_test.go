package agent

import (
	"context"
	"testing"

	"k8s.io/utils/clock"

	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/lock"
)

// A waiting agent behind the heads and the next in line, or behind the
// names of a queue too long for its summary, lets cluster events gather
// (it takes the wakes that came meanwhile with it); a head (one per slot),
// the next in line, an agent that does not know its place yet, and one in
// any other state decide at once (the wake stays for the loop).
func TestSettleOnlyFarFromTheHead(t *testing.T) {
	done, cancel := context.WithCancel(context.Background())
	cancel() // settle's wait ends at once: what it does with the wake is what counts
	for name, tc := range map[string]struct {
		d       decide.Decision
		settles bool
	}{
		"head":              {decide.Decision{State: lock.Waiting, Position: 1, Locks: []string{"l0"}}, false},
		"next in line":      {decide.Decision{State: lock.Waiting, Position: 2, Locks: []string{"l0"}}, false},
		"third of one slot": {decide.Decision{State: lock.Waiting, Position: 3, Locks: []string{"l0"}}, true},
		"second of 2 slots": {decide.Decision{State: lock.Waiting, Position: 2, Locks: []string{"l0", "l1"}}, false},
		"behind the cut":    {decide.Decision{State: lock.Waiting, Position: 0, BehindCut: true, Locks: []string{"l0"}}, true},
		"third of 2 slots":  {decide.Decision{State: lock.Waiting, Position: 3, Locks: []string{"l0", "l1"}}, false},
		"fourth of 2 slots": {decide.Decision{State: lock.Waiting, Position: 4, Locks: []string{"l0", "l1"}}, true},
		"place unknown":     {decide.Decision{State: lock.Waiting, Position: 0, Locks: []string{"l0"}}, false},
		"draining":          {decide.Decision{State: lock.Draining, Position: 9, Locks: []string{"l0"}}, false},
	} {
		a := &Agent{signals: signals{wake: make(chan struct{}, 1)}, decision: tc.d, clock: clock.RealClock{}}
		a.poke()
		a.settle(done, nil, nil)
		if left := len(a.signals.wake) == 1; left == tc.settles {
			t.Errorf("%s: wake left for the loop %v, want %v", name, left, !tc.settles)
		}
	}
}
