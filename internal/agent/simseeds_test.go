package agent

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// seedRun is what one seed left: its world and the property it broke.
type seedRun struct {
	seed uint64
	w    *world
	err  error
}

// seedResults sums a run of seeds.
type seedResults struct {
	workers        int
	steps, actions int
	sleeps         int      // agents that stopped watching far back
	last           *world   // the world of the last seed run (for SIM_SEED's trace)
	failed         *seedRun // the failure of the earliest seed in the list that failed
}

// runSeeds runs the seeds on workers goroutines: each seed's world is its
// own (its API server, clock, hosts and random source), so a seed's run is
// the same whichever worker takes it. Once a seed fails, seeds after it in
// the list are not started; the failure reported is the earliest seed's in
// the list, so a failing run names the same seed every time.
func runSeeds(seeds []uint64, workers int, simulate func(uint64) (*world, error)) seedResults {
	workers = max(1, min(workers, len(seeds)))
	res := seedResults{workers: workers}
	var (
		mu       sync.Mutex
		next     int
		failedAt = len(seeds)
		wg       sync.WaitGroup
	)
	take := func() (int, bool) {
		mu.Lock()
		defer mu.Unlock()
		if next >= failedAt {
			return 0, false
		}
		next++
		return next - 1, true
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i, ok := take()
				if !ok {
					return
				}
				w, err := simulate(seeds[i])
				mu.Lock()
				res.steps += w.steps
				res.actions += w.actions
				res.sleeps += w.sleeps
				res.last = w
				if err != nil && i < failedAt {
					failedAt = i
					res.failed = &seedRun{seed: seeds[i], w: w, err: err}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return res
}

// A failing run names the earliest failing seed of the list, even when a
// later seed failed first, and starts no seed after a failure.
func TestRunSeedsReportsTheEarliestFailure(t *testing.T) {
	seeds := make([]uint64, 200)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	var ran [201]atomic.Bool
	later := make(chan struct{})
	res := runSeeds(seeds, 4, func(seed uint64) (*world, error) {
		ran[seed].Store(true)
		w := &world{steps: 1, actions: 2}
		switch seed {
		case 50: // fails once seed 120 has failed
			<-later
			return w, fmt.Errorf("seed %d broke", seed)
		case 120:
			defer close(later)
			return w, fmt.Errorf("seed %d broke", seed)
		}
		return w, nil
	})
	if res.failed == nil || res.failed.seed != 50 || res.failed.err.Error() != "seed 50 broke" {
		t.Fatalf("failure reported: %+v, want seed 50's", res.failed)
	}
	for seed := 1; seed <= 120; seed++ {
		if !ran[seed].Load() {
			t.Errorf("seed %d, before the first failure met, did not run", seed)
		}
	}
	if res.workers != 4 || res.steps < 120 || res.actions != 2*res.steps {
		t.Errorf("workers %d, steps %d, actions %d; want 4, at least 120, twice the steps", res.workers, res.steps, res.actions)
	}

	// One worker: the seeds in order, none after the failure.
	var after atomic.Int32
	res = runSeeds(seeds, 1, func(seed uint64) (*world, error) {
		if seed > 120 {
			after.Add(1)
		}
		if seed == 120 {
			return &world{}, fmt.Errorf("seed %d broke", seed)
		}
		return &world{}, nil
	})
	if res.failed == nil || res.failed.seed != 120 || after.Load() != 0 {
		t.Errorf("one worker: failure %+v, %d seeds run after it; want seed 120's, none", res.failed, after.Load())
	}
}
