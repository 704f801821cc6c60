package agent

// The protocol's seeded simulation. Many real Agents (this package's code,
// decide's decisions, lock's writes) run against an in-memory model of the
// API server (test/simapi) with a simulated clock; the simulation chooses,
// from a seeded random source, every interleaving: which agent steps, when
// each watch delivers what, when time passes, and every fault: requests and
// scripts that end or fail, agents stopped, crashed at any API call and
// started again with their state directory kept or wiped, control-plane
// outages, watches that fall behind the compacted log (410 Gone) and
// relist, Nodes deleted and created again, pauses, and MaintenancePolicies
// with groups and slots. After every action a judge that shares no code
// with the protocol checks what must always hold:
//
//   - safety: in each group, at most its slots of nodes in maintenance (the
//     in-progress file), each holding one of its group's locks;
//   - liveness: a node that asks, whose agent runs and whose gates are open,
//     gets a lock within a bound once one of its group is free;
//   - no agent fails the same step for ever;
//   - a node without a request has no record and no place in a queue
//     summary within a bound;
//
// and, when the faults stop, that every node settles: no request, no record,
// no lock held, nothing cordoned.
//
// SIM_SEEDS sets how many seeds run (from 1; simDefaultSeeds, a fortieth
// of them under the race detector), SIM_SEED runs one seed with its trace
// in the log, SIM_VERBOSE=1 traces every step and API write. A failing
// seed is printed, and belongs in simRegressions once fixed.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/policy"
	"github.com/kustodian/kustodian/test/simapi"
)

// simRegressions are seeds that once failed: they run first, always.
var simRegressions = []uint64{
	16,  // an admin deleted a waiting node's record: its agent saw its own last write for ever, missed itself in every LIST, and retried "the decision still needs {Queue:true}"
	44,  // a record written while the Node was gone (another group): the same endless retry once the Node was back
	132, // a Node deleted mid-drain took its lock with it; the agent, its token dead, still told the script to go ahead
}

// simDefaultSeeds is how many seeds a run takes (make sim: a few minutes
// on two cores).
const simDefaultSeeds = 1200

// simEvents is how many actions a seed takes before its faults stop.
const simEvents = 700

func TestSimulation(t *testing.T) {
	if testing.Short() {
		t.Skip("the simulation runs in make test; -short skips it")
	}
	var seeds []uint64
	if v := os.Getenv("SIM_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SIM_SEED=%q: not a number", v)
		}
		seeds = []uint64{s}
	} else {
		n := simDefaultSeeds
		if raceEnabled {
			n = simDefaultSeeds / 40
		}
		if v := os.Getenv("SIM_SEEDS"); v != "" {
			var err error
			if n, err = strconv.Atoi(v); err != nil || n < 1 {
				t.Fatalf("SIM_SEEDS=%q: not a positive number", v)
			}
		}
		seeds = append(seeds, simRegressions...)
		for s := 1; s <= n; s++ {
			seeds = append(seeds, uint64(s))
		}
	}
	start := time.Now()
	res := runSeeds(seeds, runtime.GOMAXPROCS(0), func(seed uint64) (*world, error) { return simulate(t, seed) })
	if res.failed != nil {
		seed, w := res.failed.seed, res.failed.w
		t.Fatalf("seed %d: %v\n(repeat it with SIM_SEED=%d go test -run TestSimulation ./internal/agent)\nthe last of the trace:\n%s",
			seed, res.failed.err, seed, strings.Join(w.trace, "\n"))
	}
	if len(seeds) == 1 && res.last != nil {
		t.Logf("trace of seed %d:\n%s", seeds[0], strings.Join(res.last.trace, "\n"))
	}
	t.Logf("%d seeds, %d at a time, %d actions, %d agent steps (interleavings explored), %d sleeps far back, in %s",
		len(seeds), res.workers, res.actions, res.steps, res.sleeps, time.Since(start).Round(time.Millisecond))
	if len(seeds) >= 100 && res.sleeps == 0 {
		t.Errorf("no agent slept far back in %d seeds: the simulation does not explore it", len(seeds))
	}
}

// simulate runs one seed and returns the first property it found broken.
func simulate(t *testing.T, seed uint64) (*world, error) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	w := &world{rng: rng, api: simapi.New(), now: time.Date(2026, 11, 25, 2, 0, 0, 0, time.UTC)}
	w.clock = testingclock.NewFakeClock(w.now)
	w.api.KeepChanges = 50 + rng.IntN(400)
	w.cfg = config.Defaults()
	dir := t.TempDir()
	n := 3 + rng.IntN(6)
	w.setPolicy(rng)
	w.nodeBound = rng.IntN(2) == 0
	w.nearBand = int(seed % 3) // not from rng: the pinned seeds' worlds stay what they were
	for i := range n {
		h := &host{w: w, name: fmt.Sprintf("node-%d", i), zone: string(rune('a' + rng.IntN(2))), stay: rng.IntN(2) == 0}
		h.dir = filepath.Join(dir, fmt.Sprint(seed), h.name)
		if err := os.MkdirAll(h.stateDir(), 0o755); err != nil {
			return w, err
		}
		w.api.Put(simapi.Key{Resource: simapi.Nodes, Name: h.name}, simNode(h.name, h.zone))
		w.hosts = append(w.hosts, h)
	}
	w.tracef("seed %d: %d nodes, policy: %s, tokens bound to Nodes: %v, near band: %d", seed, n, w.policyText(), w.nodeBound, w.nearBand)
	defer func() {
		for _, h := range w.hosts {
			h.stop("end of the simulation")
		}
	}()
	for _, h := range w.hosts {
		if h.stay {
			h.start()
		}
	}
	j := newJudge(w)
	for range simEvents {
		w.act(false)
		if err := j.check(); err != nil {
			return w, err
		}
	}
	w.tracef("the faults stop; every node must settle")
	w.calm()
	deadline := w.now.Add(time.Duration(n)*5*time.Minute + 10*time.Minute)
	for !w.settled() {
		if w.now.After(deadline) {
			return w, fmt.Errorf("the nodes did not settle by %s after the faults stopped: %s", deadline.Sub(w.now), w.unsettled())
		}
		w.act(true)
		if err := j.check(); err != nil {
			return w, err
		}
	}
	return w, nil
}

// setPolicy chooses the MaintenancePolicy: none (one slot for all), or one
// with slots, grouped by zone or not.
func (w *world) setPolicy(rng *rand.Rand) {
	w.concurrency = 1
	switch rng.IntN(3) {
	case 0:
		return
	case 1:
		w.groupBy = "zone"
	}
	w.concurrency = 1 + rng.IntN(2)
	w.hasPolicy = true
	spec := map[string]any{"concurrency": int64(w.concurrency)}
	if w.groupBy != "" {
		spec["groupBy"] = w.groupBy
	}
	u := simapi.Unstructured(policy.Group+"/"+policy.Version, policy.Kind, simNamespace, "sim", spec)
	w.api.Put(simapi.Key{Resource: policy.GVR, Namespace: simNamespace, Name: "sim"}, u)
}

// group is the judge's own rule for a host's group.
func (w *world) group(h *host) string {
	if w.groupBy != "" {
		return h.zone
	}
	return ""
}

// Fault state of the world.
type faults struct {
	downUntil time.Time
	calm      bool
	// work, when set, is how long every script works (the tests'
	// zero-length maintenances: a queue as fast as the protocol goes).
	work *time.Duration
}

// act takes one action. calm: no more faults and no new requests; scripts
// end well and soon.
func (w *world) act(calm bool) {
	w.actions++
	if calm {
		w.faults.calm = true
	}
	w.housekeeping()
	r := w.rng.IntN(100)
	switch {
	case r < 40:
		if h := w.pick(func(h *host) bool { return h.due() }); h != nil {
			h.step()
			return
		}
		w.advance()
	case r < 60:
		if h := w.pick(func(h *host) bool { return h.running() && h.pendingWatches() }); h != nil {
			h.deliverWatches()
			return
		}
		w.advance()
	case r < 68:
		if h := w.pick(func(h *host) bool { return h.drainRunning() }); h != nil {
			h.finishDrain()
			return
		}
		w.advance()
	case r < 80:
		w.advance()
	case r < 88 && !w.faults.calm:
		if h := w.pick(func(h *host) bool { return !h.requested() && !h.nodeGone }); h != nil {
			w.request(h)
		}
	case r < 91 && !w.faults.calm:
		if h := w.pick(func(h *host) bool { return h.running() }); h != nil {
			w.restart(h)
		}
	case r < 93 && !w.faults.calm && !w.api.Down:
		if h := w.pick(func(h *host) bool { return h.running() }); h != nil {
			for _, sw := range h.watches {
				sw.relist(w.api)
			}
			w.tracef("%s: its watches relist", h.name)
		}
	case r < 94 && !w.faults.calm && !w.api.Down:
		d := time.Duration(5+w.rng.IntN(120)) * time.Second
		w.api.Down = true
		w.faults.downUntil = w.now.Add(d)
		w.tracef("the control plane goes down for %s", d)
	case r < 95 && !w.faults.calm && !w.api.Down:
		if h := w.pick(func(h *host) bool { return !h.nodeGone }); h != nil && w.rng.IntN(3) == 0 {
			_ = w.api.Delete(simapi.Key{Resource: simapi.Nodes, Name: h.name})
			h.nodeGone = true
			h.exempt = h.exempt || h.inProgress()
			h.nodeBackAt = w.now.Add(time.Duration(30+w.rng.IntN(300)) * time.Second)
			w.tracef("%s: its Node is deleted (back at %s)", h.name, h.nodeBackAt.Format("15:04:05"))
		}
	case r < 96 && !w.faults.calm && !w.api.Down:
		if w.rng.IntN(4) == 0 {
			w.setPaused(!w.paused)
		}
	case r < 97 && !w.faults.calm && !w.api.Down:
		// An admin cleans up a record by hand (kubectl delete lease).
		if h := w.pick(func(h *host) bool { return true }); h != nil && w.rng.IntN(3) == 0 {
			if err := w.api.Delete(simapi.Key{Resource: simapi.Leases, Namespace: simNamespace, Name: "node-" + h.name}); err == nil {
				w.tracef("%s: an admin deletes its record", h.name)
			}
		}
	default:
		w.advance()
	}
}

// housekeeping is what happens on its own at its time: scripts end,
// outages end, Nodes come back, stopped agents start again, the path unit
// starts an agent for a request.
func (w *world) housekeeping() {
	if w.api.Down && !w.now.Before(w.faults.downUntil) {
		w.api.Down = false
		w.tracef("the control plane is back")
		for _, h := range w.hosts {
			if h.running() {
				// rideOut reads the cluster anew.
				for _, sw := range h.watches {
					sw.relist(w.api)
				}
			}
		}
	}
	for _, h := range w.hosts {
		if h.nodeGone && !w.api.Down && (w.faults.calm || !w.now.Before(h.nodeBackAt)) {
			w.api.Put(simapi.Key{Resource: simapi.Nodes, Name: h.name}, simNode(h.name, h.zone))
			h.nodeGone = false
			w.tracef("%s: its Node is created again", h.name)
			if w.nodeBound && h.running() {
				// Its token died with the Node: an operator mints a new one.
				h.stop("its token died with its Node")
				h.start()
			}
		}
		w.script(h)
		if !h.running() {
			restart := !h.restartAt.IsZero() && !w.now.Before(h.restartAt)
			pathUnit := !h.stay && h.restartAt.IsZero() && (h.requested() || h.inProgress())
			if restart || pathUnit {
				h.start()
			}
		}
	}
}

// script plays the maintenance script of a host in maintenance: it works
// for a while, then removes the request; a failing one keeps it until an
// operator, later, repairs the node and removes it.
func (w *world) script(h *host) {
	if !h.inProgress() || !h.requested() {
		h.scriptDone = time.Time{}
		return
	}
	if h.scriptDone.IsZero() {
		h.failing = !w.faults.calm && w.rng.IntN(20) == 0
		work := time.Duration(w.rng.IntN(60)) * time.Second
		if w.faults.work != nil {
			work = *w.faults.work
		}
		if h.failing {
			work = time.Duration(5+w.rng.IntN(10)) * time.Minute
		}
		h.scriptDone = w.now.Add(work)
		if h.failing {
			w.tracef("%s: the script fails; an operator repairs the node at %s", h.name, h.scriptDone.Format("15:04:05"))
		}
	}
	if w.faults.calm && h.failing {
		h.scriptDone, h.failing = w.now, false
	}
	if !w.now.Before(h.scriptDone) {
		h.files.read = false
		if err := os.Remove(h.requestFile()); err == nil {
			w.tracef("%s: the script is done: request removed", h.name)
			h.poke()
		}
		h.scriptDone = time.Time{}
	}
}

func (h *host) poke() {
	if h.agent != nil {
		h.agent.poke()
	}
}

// request creates the request file, as a maintenance script does.
func (w *world) request(h *host) {
	h.files.read = false
	if err := os.WriteFile(h.requestFile(), []byte("patch\n"), 0o644); err != nil {
		panic(err)
	}
	w.tracef("%s: maintenance requested", h.name)
	h.poke()
}

// restart stops an agent, by SIGTERM or kill -9, and says when it starts
// again: killed, systemd starts it again soon (Restart=on-failure);
// stopped, an operator starts it again later (--stay), or the path unit
// does as soon as a request or in-progress file exists. It may find its
// state directory wiped, or the host's files gone too (the request with
// them), as on a host set up anew.
func (w *world) restart(h *host) {
	if w.rng.IntN(2) == 0 {
		h.stop("killed (kill -9)")
		h.restartAt = w.now.Add(time.Duration(1+w.rng.IntN(30)) * time.Second)
	} else {
		h.stop("stopped (SIGTERM)")
		h.restartAt = time.Time{}
		if h.stay {
			h.restartAt = w.now.Add(time.Duration(w.rng.IntN(120)) * time.Second)
		}
	}
	h.files.read = false
	switch w.rng.IntN(4) {
	case 0:
		_ = os.RemoveAll(h.stateDir())
		_ = os.MkdirAll(h.stateDir(), 0o755)
		w.tracef("%s: its state directory is wiped", h.name)
	case 1:
		for _, f := range []string{h.stateDir(), h.requestFile(), h.inProgressFile()} {
			_ = os.RemoveAll(f)
		}
		_ = os.MkdirAll(h.stateDir(), 0o755)
		w.tracef("%s: its state directory and host files are gone", h.name)
	}
}

func (w *world) setPaused(paused bool) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "control", Namespace: simNamespace}, Data: map[string]string{"paused": fmt.Sprint(paused)}}
	w.api.Put(simapi.Key{Resource: simapi.ConfigMaps, Namespace: simNamespace, Name: "control"}, cm)
	w.paused = paused
	w.tracef("maintenance paused: %v", paused)
}

// calm stops the faults: the control plane is up, Nodes are back, nothing
// is paused, and every agent runs once more (an operator starts them all:
// a stopped agent's record goes only when an agent runs).
func (w *world) calm() {
	w.faults.calm = true
	if w.api.Down {
		w.faults.downUntil = w.now
	}
	if w.paused {
		w.setPaused(false)
	}
	w.housekeeping()
	for _, h := range w.hosts {
		if !h.running() {
			h.start()
		}
	}
}

// pick chooses a host that satisfies ok, or nil.
func (w *world) pick(ok func(*host) bool) *host {
	var c []*host
	for _, h := range w.hosts {
		if ok(h) {
			c = append(c, h)
		}
	}
	if len(c) == 0 {
		return nil
	}
	return c[w.rng.IntN(len(c))]
}

// The judge. It reads the model's objects and the hosts' files and states
// its own rules: it calls none of the protocol's code.

// The protocol's names the judge relies on, from the contract (docs/agent.md).
const (
	judgeLabelPolicy     = "kustodian.io/policy"
	judgeAnnotationGroup = "kustodian.io/group"
	judgeAnnotationQueue = "kustodian.io/queue"
)
