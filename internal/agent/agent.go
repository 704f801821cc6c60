// Package agent is the node agent's state machine (docs/agent.md, "States"):
// it observes the host files, the lock Leases, its node record and its Node,
// derives its state, and takes the next idempotent step, again at every
// event (files through fsnotify, Leases, the control ConfigMap and the Node
// through informers) and at least every resync period.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/drain"
	"github.com/kustodian/kustodian/internal/hostfiles"
	"github.com/kustodian/kustodian/internal/hostfiles/hostwatch"
	"github.com/kustodian/kustodian/internal/jobs"
	"github.com/kustodian/kustodian/internal/kured/kuredapi"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/lock/lockapi"
	"github.com/kustodian/kustodian/internal/notify"
	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/kustodian/kustodian/internal/systemd"
	"github.com/kustodian/kustodian/internal/version"
)

// Agent runs the maintenance protocol for one node.
type Agent struct {
	cfg    config.Agent
	node   string
	owner  *lock.NodeRef
	log    *slog.Logger
	notify systemd.Notifier
	now    func() time.Time
	clock  clock.WithTicker

	// The API server's client, this node's Node (every write to it), and
	// the host's request files.
	kube  kubernetes.Interface
	nodes nodeWriter
	files hostfiles.Files

	locks   lockSide   // the locks and the queues' summaries, and this agent's view of them
	records recordSide // the nodes' records
	caches  informed   // the informers' stores
	queue   queueView  // this agent's view of its group's queue
	drain   drainSide  // the drain: its seam, the run, its escalation
	evict   evictSide  // whom the drain evicts as
	host    hostSide   // logind: reboots, inhibitor locks, the shutdown
	jobs    jobsSide   // managed jobs
	kured   kuredSide  // Kured's lock, when kured.enabled
	gates   gateSide   // the last answers of the gates a decision asked for
	metrics metricSide // the metrics in the state directory
	// reported is what the agent last said outside its record: systemd's
	// status line, the Node's conditions and marks, the token's expiry.
	reported reportedSide
	signals  signals

	// decision is the last decision; its policy and group are the node's.
	decision decide.Decision
	// failed is the request whose drain failed, and why
	// (drain.onTimeout=hold).
	failed struct{ request, why string }

	notifications *notify.Sender // nil: none
	silences      *silencer      // the node's silence in Alertmanager
	rollouts      *rollouter     // beside the maintenance loop

	failing failing // the run of failed steps it is in
	rebootTrigger
}

// New builds an agent.
func New(o Options) *Agent {
	clk := o.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	now := clk.Now
	api := &lockapi.Client{Kube: o.Kube, Namespace: o.Config.Namespace, Now: now}
	a := &Agent{
		cfg:     o.Config,
		node:    o.NodeName,
		owner:   o.Owner,
		kube:    o.Kube,
		nodes:   nodeWriter{kube: o.Kube, name: o.NodeName},
		caches:  informed{dyn: o.Dynamic, meta: o.Metadata},
		log:     o.Log.With("node", o.NodeName),
		notify:  o.Notifier,
		now:     now,
		clock:   clk,
		files:   o.Config.Files(),
		locks:   lockSide{store: api, node: o.NodeName, staleAfter: o.Config.Queue.StaleAfter(), holders: map[string]holderCheck{}},
		records: recordSide{store: api, node: o.NodeName},
		gates:   gateSide{http: &http.Client{Timeout: 10 * time.Second}},
		// A watch that fails makes the Run loop check the API server.
		signals:       signals{wake: make(chan struct{}, 1), watchBroken: make(chan struct{}, 1)},
		notifications: o.Notifications,
	}
	a.queue.seen, a.queue.changed, a.queue.last, a.queue.jitter = map[string]time.Time{}, map[string]time.Time{}, map[string]seenQueue{}, jitterOf(o.NodeName)
	a.queue.nearBand = decide.NearBand
	a.locks.sawOwn = func(q *coordv1.Lease) { a.sawQueue(nil, q) }
	a.reported.token.current, a.reported.hostWarning = o.Token, o.HostWarning
	if o.ConnWatch != nil {
		a.signals.watchBroken = o.ConnWatch.failed
	}
	a.drain.seam = &drain.Drainer{Client: o.Kube, Pods: o.Evictor, Settings: o.Config.Drain, Log: a.log, Escalation: a.escalation()}
	a.evict.client = o.Evictor
	a.silences = newSilencer(a)
	a.evict.config = o.EvictorKubeconfig
	a.reported.marks.version = version.Version
	a.jobs.store = jobs.StoreIn(o.Config.StateDir)
	a.jobs.runner = newJobRunner(o.Config.StateDir)
	a.rollouts = newRollouter(a)
	a.rebootTrigger.check = o.Config.RebootCheck()
	if o.Config.Kured.Enabled != "false" {
		a.kured.keys = o.Config.Kured.LockAnnotations
		a.kured.locker = &kuredapi.Locker{Client: o.Kube, Namespace: o.Config.Kured.Namespace, Name: o.Config.Kured.DaemonSet, Keys: a.kured.keys, Now: now}
		a.kured.ds = cache.NewObjectName(o.Config.Kured.Namespace, o.Config.Kured.DaemonSet)
	}
	a.openMetrics()
	if o.Login1 != nil {
		a.host.login1 = o.Login1
		a.host.reboot = o.Login1
		a.host.block = o.Login1.NewLock("shutdown", "kustodian", "draining or giving back the node to Kubernetes", "block")
		a.host.delay = o.Login1.NewLock("shutdown", "kustodian", "recording the reboot in the cluster", "delay")
	}
	return a
}

// PermanentError is an error no retry can fix: bad input, missing objects.
// The agent stops with it (and a non-zero exit).
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

func permanent(err error) error { return &PermanentError{Err: err} }

// Run runs the agent until the node is back to Idle (unless Stay) or ctx
// ends. Errors of the API server are retried with backoff; only permanent
// errors end it with an error.
func (a *Agent) Run(ctx context.Context) error {
	// Read the files before touching the cluster: an unreadable request must
	// change nothing there.
	if _, err := a.files.Observe(); err != nil {
		return permanent(err)
	}
	if a.cfg.Rollouts.Enabled {
		if _, err := rollout.ReadTrustedKeys(a.cfg.Rollouts.TrustedKeys); err != nil {
			return permanent(fmt.Errorf("rollouts.trustedKeys: %w", err))
		}
	}
	if err := a.untilStarted(ctx, a.startReading); err != nil || ctx.Err() != nil {
		return err
	}
	fileChanges, err := hostwatch.Files(ctx, a.files)
	if err != nil {
		return permanent(err)
	}
	shutdown := a.watchShutdown(ctx)
	jobChanges := watchJobs(ctx, a.jobs.store.Dir)
	defer a.serveMetrics()()
	refreshCtx, stopRefresh := context.WithCancel(ctx)
	defer stopRefresh()
	go a.refreshMetrics(refreshCtx)
	// What is still queued when the node is Idle goes out before the
	// agent exits (the completed message, usually), within a bound; an
	// agent stopped by systemd (a shutdown, a restart) waits less, so
	// that an unreachable URL never holds up a reboot.
	defer func() {
		grace := notifyGrace
		if ctx.Err() != nil {
			grace = notifyGraceStopping
		}
		a.notifications.Close(grace)
	}()
	defer a.silences.start(ctx)()
	a.notify.Ready()
	a.log.Info("agent started", "namespace", a.cfg.Namespace, "stay", a.cfg.Stay)

	wakeAt := a.clock.NewTimer(time.Hour)
	defer wakeAt.Stop()
	heartbeat := a.clock.NewTicker(a.cfg.Queue.Heartbeat)
	defer heartbeat.Stop()
	resync := a.clock.NewTicker(a.cfg.Resync)
	defer resync.Stop()
	backoff := RetryBackoff(time.Second)
	for {
		if a.host.shuttingDown {
			// Rebooting is recorded; the next step belongs to the next boot.
			select {
			case <-ctx.Done():
				return a.stop()
			case active, ok := <-shutdown:
				if !ok {
					shutdown = nil
				} else {
					a.onShutdown(ctx, active)
				}
			}
			continue
		}
		done, err := a.step(ctx)
		if ctx.Err() != nil {
			return a.stop()
		}
		var pe *PermanentError
		if errors.As(err, &pe) {
			a.stop()
			return err
		}
		if err != nil {
			a.stepFailed(ctx, err)
			delay := backoff.Step()
			a.setStatus(fmt.Sprintf("error, retrying in %s: %s", delay.Round(100*time.Millisecond), err))
			a.log.Error("step failed; retrying", "err", err, "retry_in", delay)
			if err := a.rideOut(ctx, delay); err != nil {
				a.log.Error("reading the cluster again failed; retrying", "err", err)
			}
			if ctx.Err() != nil {
				return a.stop()
			}
			continue
		}
		a.stepSucceeded()
		// Whatever the step published (nothing, at Idle): a warning about
		// the node's token, which its renewer told meanwhile.
		a.warnToken(ctx, a.cachedNode())
		backoff = RetryBackoff(time.Second)
		wakeAt.Reset(a.untilWake())
		if done {
			a.log.Info("node is Idle; exiting")
			a.notify.Stopping()
			return nil
		}
		select {
		case <-ctx.Done():
			return a.stop()
		case <-a.signals.wake:
			a.settle(ctx, fileChanges, jobChanges)
		case <-wakeAt.C():
		case <-fileChanges:
		case <-jobChanges:
		case <-heartbeat.C():
		case <-resync.C():
		case <-a.signals.watchBroken:
			if err := a.watchBroke(ctx); err != nil {
				a.log.Error("reading the cluster again failed; retrying", "err", err)
			}
		case active, ok := <-shutdown:
			if !ok {
				shutdown = nil
				continue
			}
			a.onShutdown(ctx, active)
		}
	}
}

// notifyGrace is how long an agent that exits on its own (the node is
// Idle) waits for its notifications to go out; notifyGraceStopping, one
// that systemd stops.
const (
	notifyGrace         = 15 * time.Second
	notifyGraceStopping = 2 * time.Second
)

// stop ends a running drain and tells systemd. The state stays as it is in
// the cluster and on disk; the next start continues from there.
func (a *Agent) stop() error {
	a.notify.Stopping()
	a.stopDrain()
	if a.host.block != nil {
		a.host.block.Release()
		a.host.delay.Release()
	}
	return nil
}

// step takes the next step: the maintenance loop's (reconcile), then the
// rollouts' beside it. done is true when the node is Idle and the agent
// should exit.
func (a *Agent) step(ctx context.Context) (done bool, err error) {
	done, state, node, err := a.reconcile(ctx)
	if err != nil {
		return false, err
	}
	if err := a.rollouts.step(ctx, state, node); err != nil {
		return false, err
	}
	a.markNode(ctx, node)
	return done, nil
}

// reconcile takes the maintenance loop's next step: a decision, made from
// a snapshot and the look-ups it asks for (lookups.go), carried out (act.go).
// It says the state it left the node in, with its Node as last seen. done
// is true when the node is Idle and the agent should exit.
func (a *Agent) reconcile(ctx context.Context) (done bool, state lock.State, node *corev1.Node, err error) {
	if err := a.lookFarBack(ctx); err != nil {
		return false, "", nil, err
	}
	d, s, err := a.decide(ctx)
	if err != nil {
		return false, "", nil, err
	}
	if a.wakeToTakeOver(ctx, d) {
		return false, d.State, s.node, nil
	}
	asked, err := a.act(ctx, d, s)
	if err != nil {
		return false, "", nil, err
	}
	a.sleepOrWatch(ctx, a.decision)
	// With rollouts, the agent stays to see them come; it goes on with a
	// reboot it asked for.
	done = d.State == lock.Idle && !asked && !a.cfg.Stay && !a.cfg.Rollouts.Enabled && !a.cfg.ClusterRequests.Enabled
	return done, d.State, s.node, nil
}
