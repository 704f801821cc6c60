package agent

// The world of the protocol's simulation (sim_test.go): an in-memory API
// server (test/simapi), hosts with their request and in-progress files in
// temporary directories, and the real Agent of each host, stepped one at a
// time by the simulation with a simulated clock. The agents' watches are
// played by the simulation too: it delivers each change to each agent's
// caches late, in order, or by a relist, as informers do.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/drain"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/policy"
	"github.com/kustodian/kustodian/test/simapi"
)

const simNamespace = "kustodian"

// simVerbose (SIM_VERBOSE=1) traces every step of every agent.
var simVerbose = os.Getenv("SIM_VERBOSE") != ""

// world is one run of the simulation.
type world struct {
	rng   *rand.Rand
	api   *simapi.Server
	now   time.Time
	clock *testingclock.FakeClock // the agents' clock, at now
	hosts []*host
	cfg   config.Agent
	// trace keeps the last lines of what happened, for a failure report.
	trace []string
	// steps counts the agents' steps: the interleavings explored.
	steps   int
	actions int
	faults  faults
	// policy: the MaintenancePolicy in force (nil: the built-in default),
	// as the simulation wrote it; the judge reads its own copy.
	hasPolicy   bool
	groupBy     string
	concurrency int
	paused      bool
	// nodeBound: the agents' tokens are bound to their Nodes (the locks
	// they take are owned by them); otherwise they use an admin's.
	nodeBound bool
	// nearBand: the agents' (decide.NearBand in production).
	nearBand int
	// sleeps counts the agents that stopped watching far back.
	sleeps int
	// quietAt: the server's revision when no watch had anything to
	// deliver (0: not known). It stays so until the server writes: a
	// watch starts at the server's revision and delivering only empties
	// it.
	quietAt int64
}

// host is one node: its files, its Node, and its agent while it runs.
type host struct {
	w    *world
	name string
	zone string
	dir  string
	// leaseLists and queueWrites count its agents' LISTs of Leases and
	// writes of queue Leases (the tests' measures).
	leaseLists, queueWrites int
	// stay: the agent runs with --stay; otherwise it exits when Idle and
	// the path unit starts it again when a request appears.
	stay bool

	agent   *Agent
	ctx     context.Context // the agent process's
	cancel  context.CancelFunc
	watches []*simWatch
	// crashAt: the agent crashes at this API call of its life (0: never);
	// calls counts them; crashed: it did.
	crashAt, calls int
	crashed        bool

	// The Run loop's timers, in simulated time.
	nextBeat, nextResync, retryAt time.Time
	backoff                       wait.Backoff
	// The last error and how many steps in a row failed with it.
	lastErr   string
	sameErr   int
	restartAt time.Time // a stopped agent starts again then (zero: when asked)
	files     struct{ request, inProgress, read bool }
	// exitedIdle: the agent exited on its own, its node Idle.
	exitedIdle bool

	drainer *simDrainer
	// The script: it works until scriptDone once it may proceed, and
	// fails (keeps the request) when failing.
	scriptDone time.Time
	failing    bool
	nodeGone   bool      // its Node object is deleted
	nodeBackAt time.Time // and is created again then
	// exempt: its Node was deleted during its maintenance, which lets the
	// lock go (by design: a node removed from the cluster must not hold
	// the others back); the safety rule does not count it until it is out
	// of maintenance.
	exempt bool
}

func (w *world) tracef(format string, args ...any) {
	line := fmt.Sprintf("%s %s", w.now.Format("15:04:05.000"), fmt.Sprintf(format, args...))
	w.trace = append(w.trace, line)
	if max := 400 + 4000*btoi(simVerbose); len(w.trace) > max {
		w.trace = w.trace[len(w.trace)-max*3/4:]
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (h *host) requestFile() string    { return filepath.Join(h.dir, "maintenance-required") }
func (h *host) inProgressFile() string { return filepath.Join(h.dir, "maintenance-in-progress") }
func (h *host) stateDir() string       { return filepath.Join(h.dir, "state") }

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// requested and inProgress read the host's files, once after each change
// the simulation or its agent may have made (files.read = false).
func (h *host) requested() bool  { h.readFiles(); return h.files.request }
func (h *host) inProgress() bool { h.readFiles(); return h.files.inProgress }

func (h *host) readFiles() {
	if h.files.read {
		return
	}
	h.files.request, h.files.inProgress = exists(h.requestFile()), exists(h.inProgressFile())
	h.files.read = true
}

// config is the agent's configuration on every host.
func (w *world) agentConfig(h *host) config.Agent {
	c := config.Defaults()
	c.Namespace = simNamespace
	c.RequestFile = h.requestFile()
	c.InProgressFile = h.inProgressFile()
	c.RebootSentinel = filepath.Join(h.dir, "reboot-required")
	c.StateDir = h.stateDir()
	c.Stay = h.stay
	c.Kured.Enabled = "false"
	c.Metrics = config.Metrics{}
	c.Notify = config.Notify{}
	c.Drain.KubeletKubeconfig = config.KubeletKubeconfigNone
	return c
}

// start starts the host's agent: a new process, knowing nothing but what
// it reads.
func (h *host) start() {
	w := h.w
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.crashed, h.calls = false, 0
	h.crashAt = 0
	if w.rng.IntN(3) == 0 {
		h.crashAt = 1 + w.rng.IntN(30)
	}
	var owner *lock.NodeRef
	if w.nodeBound {
		// Its token is bound to its Node as it is now: it dies with it.
		if o, err := w.api.Get(simapi.Key{Resource: simapi.Nodes, Name: h.name}); err == nil {
			n := o.(*corev1.Node)
			owner = &lock.NodeRef{Name: n.Name, UID: string(n.UID)}
		}
	}
	hook := func(verb string, k simapi.Key) (error, bool) {
		if h.crashed {
			return errors.New("simulated crash: the process is gone"), false
		}
		if w.nodeBound && !w.api.Down {
			o, err := w.api.Get(simapi.Key{Resource: simapi.Nodes, Name: h.name})
			if owner == nil || err != nil || string(o.(*corev1.Node).UID) != owner.UID {
				return apierrors.NewUnauthorized("the token is bound to a Node that no longer exists"), false
			}
		}
		h.calls++
		if verb == "list" && k.Resource == simapi.Leases {
			h.leaseLists++
		}
		if (verb == "update" || verb == "create") && k.Resource == simapi.Leases && lock.IsQueueName(k.Name) {
			h.queueWrites++
		}
		if simVerbose && verb != "get" && verb != "list" {
			w.tracef("%s: API %s %s %s", h.name, verb, k.Resource.Resource, k.Name)
		}
		if h.crashAt > 0 && h.calls == h.crashAt {
			h.crashed = true
			after := w.rng.IntN(2) == 0
			w.tracef("%s: agent crashes at its API call %d (%s %s, %s it reached the API server)", h.name, h.calls, verb, k.Name, map[bool]string{true: "after", false: "before"}[after])
			return errors.New("simulated crash"), after
		}
		return nil, false
	}
	log := slog.New(slog.NewTextHandler(traceWriter{h}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	a := New(Options{Config: w.agentConfig(h), NodeName: h.name, Owner: owner, Kube: w.api.Client(hook), Log: log,
		Notifier: noNotify{}, Clock: w.clock})
	h.drainer = &simDrainer{Drainer: a.drain.seam.(*drain.Drainer), finish: make(chan struct{})}
	a.drain.seam = h.drainer
	a.metrics.store = nil // not the protocol's; they cost a file write per change
	// The simulation's queues are short: a near band of 0-2 places makes
	// some of its waiting nodes renew every other heartbeat, as far-back
	// nodes of a long queue do.
	a.queue.nearBand = w.nearBand
	hs := a.handlers()
	byName := func(name string) func(runtime.Object) bool {
		return func(o runtime.Object) bool { m, _ := meta.Accessor(o); return m.GetName() == name }
	}
	policySel := labels.SelectorFromSet(nil)
	if s, err := labels.Parse(lock.LabelPolicy); err == nil {
		policySel = s
	}
	h.watches = []*simWatch{
		{name: "group Leases", res: simapi.Leases, ns: simNamespace, handler: hs.groupLeases, match: func(o runtime.Object) bool {
			m, _ := meta.Accessor(o)
			return policySel.Matches(labels.Set(m.GetLabels()))
		}},
		{name: "own record", res: simapi.Leases, ns: simNamespace, handler: hs.ownRecord, match: byName(lock.RecordName(h.name))},
		{name: "control", res: simapi.ConfigMaps, ns: simNamespace, handler: hs.other, match: byName(lock.ControlConfigMap)},
		{name: "node", res: simapi.Nodes, handler: hs.other, match: byName(h.name)},
		{name: "pods", res: simapi.Pods, handler: hs.other, match: func(o runtime.Object) bool {
			p, ok := o.(*corev1.Pod)
			return ok && p.Spec.NodeName == h.name
		}},
		{name: "policies", res: policy.GVR, ns: simNamespace, handler: hs.other, match: func(runtime.Object) bool { return true }},
	}
	for _, wt := range h.watches {
		wt.trace = func(format string, args ...any) { w.tracef(h.name+": "+format, args...) }
		wt.store = cache.NewStore(cache.MetaNamespaceKeyFunc)
		wt.relist(w.api)
	}
	a.useCaches(caches{groupLeases: h.watches[0].store, ownRecord: h.watches[1].store, control: h.watches[2].store,
		node: h.watches[3].store, pods: h.watches[4].store, policies: h.watches[5].store})
	a.queue.far.watcher = simGroups{sw: h.watches[0], api: w.api, sleeps: &w.sleeps}
	h.agent = a
	h.nextBeat = w.now.Add(w.cfg.Queue.Heartbeat)
	h.nextResync = w.now.Add(w.cfg.Resync)
	h.retryAt = time.Time{}
	h.backoff = RetryBackoff(time.Second)
	h.lastErr, h.sameErr = "", 0
	h.restartAt = time.Time{}
	h.exitedIdle = false
	a.poke()
	w.tracef("%s: agent starts (stay %v, crashes at call %d)", h.name, h.stay, h.crashAt)
}

// stop ends the agent's process: SIGTERM (the drain is cancelled, nothing
// else) or a crash (the same here: the agent keeps nothing it must save).
func (h *host) stop(why string) {
	if h.agent == nil {
		return
	}
	h.agent.stopDrain()
	h.cancel()
	h.agent, h.watches, h.drainer = nil, nil, nil
	h.w.tracef("%s: agent stops: %s", h.name, why)
}

// running reports whether the host's agent runs.
func (h *host) running() bool { return h.agent != nil }

// due reports whether the agent would take a step now: it was poked (an
// event, a file change, the end of a drain), or a timer of its Run loop
// fired, and it is not backing off after an error.
func (h *host) due() bool {
	if h.agent == nil {
		return false
	}
	now := h.w.now
	if !h.retryAt.IsZero() {
		return !now.Before(h.retryAt)
	}
	if len(h.agent.signals.wake) > 0 {
		return true
	}
	if wake := h.agent.decision.WakeAt; !wake.IsZero() && !now.Before(wake) {
		return true
	}
	if renew := h.agent.queue.renewAt; !renew.IsZero() && !now.Before(renew) {
		return true
	}
	if look := h.agent.queue.far.listAt; !look.IsZero() && !now.Before(look) {
		return true
	}
	return !now.Before(h.nextBeat) || !now.Before(h.nextResync)
}

// nextTimer is when the agent's Run loop next wakes by itself.
func (h *host) nextTimer() time.Time {
	if h.agent == nil {
		return h.restartAt
	}
	if !h.retryAt.IsZero() {
		return h.retryAt
	}
	t := earliestOf(h.nextBeat, h.nextResync)
	if wake := h.agent.decision.WakeAt; !wake.IsZero() {
		t = earliestOf(t, wake)
	}
	return earliestOf(t, h.agent.queue.renewAt, h.agent.queue.far.listAt)
}

func earliestOf(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if !t.IsZero() && (out.IsZero() || t.Before(out)) {
			out = t
		}
	}
	return out
}

// step is one turn of the agent's Run loop: one reconcile, then what Run
// does with its result.
func (h *host) step() {
	w, a := h.w, h.agent
	now := w.now
	for !now.Before(h.nextBeat) {
		h.nextBeat = h.nextBeat.Add(w.cfg.Queue.Heartbeat)
	}
	for !now.Before(h.nextResync) {
		h.nextResync = h.nextResync.Add(w.cfg.Resync)
	}
	select {
	case <-a.signals.wake:
	default:
	}
	h.retryAt = time.Time{}
	w.steps++
	done, err := a.step(h.ctx)
	h.files.read = false
	if simVerbose {
		w.tracef("%s: step: %s %q err=%v", h.name, a.decision.State, a.decision.Message, err)
	}
	if h.crashed {
		h.stop("crashed")
		// systemd starts it again (Restart=on-failure).
		h.restartAt = w.now.Add(time.Duration(1+w.rng.IntN(30)) * time.Second)
		return
	}
	if err != nil && !h.crashed {
		a.stepFailed(h.ctx, err) // as Run does
	}
	if err != nil {
		var pe *PermanentError
		if errors.As(err, &pe) {
			h.stop("permanent error: " + err.Error())
			return
		}
		msg := err.Error()
		if w.api.Down {
			// Failing while the control plane is away is no fault of the agent.
			h.lastErr, h.sameErr = "", 0
		} else if msg == h.lastErr {
			h.sameErr++
		} else {
			h.lastErr, h.sameErr = msg, 1
		}
		// The Run loop's backoff, its jitter drawn from the seed.
		jitter := h.backoff.Jitter
		h.backoff.Jitter = 0
		delay := h.backoff.Step()
		h.backoff.Jitter = jitter
		delay += time.Duration(w.rng.Float64() * jitter * float64(delay))
		h.retryAt = now.Add(delay)
		w.tracef("%s: step failed (%d in a row), retrying in %s: %s", h.name, h.sameErr, delay.Round(time.Millisecond), msg)
		return
	}
	h.lastErr, h.sameErr = "", 0
	a.stepSucceeded()
	h.backoff = RetryBackoff(time.Second)
	if done {
		h.stop("node is Idle; exiting")
		h.exitedIdle = true
	}
}

// drainRunning reports whether the agent runs a drain that has not ended:
// it waits for the simulation to let it finish.
func (h *host) drainRunning() bool {
	return h.runningDrain() != nil
}

func (h *host) runningDrain() *drainRun {
	if h.agent == nil {
		return nil
	}
	h.agent.drain.mu.Lock()
	run := h.agent.drain.run
	h.agent.drain.mu.Unlock()
	if run == nil {
		return nil
	}
	select {
	case <-run.done:
		return nil // the agent sees it at its next step
	default:
		return run
	}
}

// finishDrain lets the running drain end (every pod gone) and waits for it.
func (h *host) finishDrain() {
	run := h.runningDrain()
	if run == nil {
		return
	}
	h.drainer.finish <- struct{}{}
	<-run.done
	h.files.read = false
	h.w.tracef("%s: drain finishes", h.name)
}

var _ io.Writer = traceWriter{}

// objects the simulation writes as an admin would.
