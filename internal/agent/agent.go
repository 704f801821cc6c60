// Package agent is the node agent's state machine (DESIGN sections 4 to 6):
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
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/drain"
	"github.com/kustodian/kustodian/internal/hostfiles"
	"github.com/kustodian/kustodian/internal/jobs"
	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/login1"
	"github.com/kustodian/kustodian/internal/systemd"
)

// Options build an Agent.
type Options struct {
	Config   config.Agent
	NodeName string
	// Owner is the Node the agent's token is bound to (nil for other
	// credentials): the locks it takes are owned by that Node.
	Owner    *lock.NodeRef
	Kube     kubernetes.Interface
	Log      *slog.Logger
	Notifier systemd.Notifier
	// Login1 is logind on the system bus; nil without one (the agent then
	// holds no inhibitor locks and does not see reboots coming).
	Login1 *login1.Manager
	Now    func() time.Time // nil: time.Now
}

// Agent runs the maintenance protocol for one node.
type Agent struct {
	cfg     config.Agent
	node    string
	owner   *lock.NodeRef
	kube    kubernetes.Interface
	log     *slog.Logger
	notify  systemd.Notifier
	now     func() time.Time
	files   hostfiles.Files
	locks   *lock.Client
	drainer *drain.Drainer

	login1 *login1.Manager
	// block keeps a reboot from cutting a drain or a completion in half,
	// for anyone who honours inhibitors; delay gives the agent the time
	// to record Rebooting when a shutdown begins.
	block, delay *login1.Lock

	leases       *leaseView
	rawLeases    cache.Store
	controlStore cache.Store
	nodeStore    cache.Store
	kuredStore   cache.Store // nil when kured.enabled is false
	jobs         jobs.Store
	runner       jobRunner
	kured        *kured.Locker
	blocked      string // why this node's own gates are closed, if they are

	wake chan struct{}

	mu    sync.Mutex // guards drain
	drain *drainRun

	lastRenew     time.Time // of the held locks, when they have a TTL
	failedRequest string    // the request whose drain failed (drain.onTimeout=hold)
	shuttingDown  bool      // the host is going down: take no more steps
	failure       string
	status        string
	holderNodes   map[string]nodeCheck
}

// drainRun is a drain running in the background.
type drainRun struct {
	request  string
	cancel   context.CancelFunc
	done     chan struct{}
	err      error
	progress string
}

type nodeCheck struct {
	exists bool
	at     time.Time
}

// New builds an agent.
func New(o Options) *Agent {
	now := o.Now
	if now == nil {
		now = time.Now
	}
	a := &Agent{
		cfg:         o.Config,
		node:        o.NodeName,
		owner:       o.Owner,
		kube:        o.Kube,
		log:         o.Log.With("node", o.NodeName),
		notify:      o.Notifier,
		now:         now,
		files:       o.Config.Files(),
		locks:       &lock.Client{Kube: o.Kube, Namespace: o.Config.Namespace, Now: now},
		wake:        make(chan struct{}, 1),
		holderNodes: map[string]nodeCheck{},
	}
	a.drainer = &drain.Drainer{Client: o.Kube, Settings: o.Config.Drain, Log: a.log}
	a.jobs = jobs.Store{Dir: jobsDir(o.Config.StateDir)}
	a.runner = newJobRunner(o.Config.StateDir)
	if o.Config.Kured.Enabled != "false" {
		a.kured = &kured.Locker{Client: o.Kube, Namespace: o.Config.Kured.Namespace, Name: o.Config.Kured.DaemonSet, Now: now}
	}
	if o.Login1 != nil {
		a.login1 = o.Login1
		a.block = o.Login1.NewLock("shutdown", "kustodian", "draining or giving back the node to Kubernetes", "block")
		a.delay = o.Login1.NewLock("shutdown", "kustodian", "recording the reboot in the cluster", "delay")
	}
	return a
}

// PermanentError is an error no retry can fix: bad input, missing objects.
// The agent stops with it (and a non-zero exit).
type PermanentError struct{ Err error }

func (e *PermanentError) Error() string { return e.Err.Error() }
func (e *PermanentError) Unwrap() error { return e.Err }

func permanent(err error) error { return &PermanentError{Err: err} }

func (a *Agent) poke() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// Run runs the agent until the node is back to Idle (unless Stay) or ctx
// ends. Errors of the API server are retried with backoff; only permanent
// errors end it with an error.
func (a *Agent) Run(ctx context.Context) error {
	// Read the files before touching the cluster: an unreadable request must
	// change nothing there.
	if _, err := a.files.Observe(); err != nil {
		return permanent(err)
	}
	if err := a.waitForAPI(ctx); err != nil || ctx.Err() != nil {
		return err
	}
	if err := a.startInformers(ctx); err != nil || ctx.Err() != nil {
		return err
	}
	fileChanges, err := a.files.Watch(ctx)
	if err != nil {
		return permanent(err)
	}
	shutdown := a.watchShutdown(ctx)
	jobChanges := watchJobs(ctx, a.jobs.Dir)
	a.notify.Ready()
	a.log.Info("agent started", "namespace", a.cfg.Namespace, "group", a.cfg.Lock.Group, "stay", a.cfg.Stay)

	heartbeat := time.NewTicker(a.cfg.Queue.Heartbeat)
	defer heartbeat.Stop()
	resync := time.NewTicker(a.cfg.Resync)
	defer resync.Stop()
	backoff := newBackoff(time.Second, 30*time.Second)
	for {
		if a.shuttingDown {
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
		done, err := a.reconcile(ctx)
		if ctx.Err() != nil {
			return a.stop()
		}
		var pe *PermanentError
		if errors.As(err, &pe) {
			a.stop()
			return err
		}
		if err != nil {
			delay := backoff.Next()
			a.setStatus(fmt.Sprintf("error, retrying in %s: %s", delay.Round(100*time.Millisecond), err))
			a.log.Error("step failed; retrying", "err", err, "retry_in", delay)
			select {
			case <-ctx.Done():
				return a.stop()
			case <-time.After(delay):
			}
			continue
		}
		backoff.Reset()
		if done {
			a.log.Info("node is Idle; exiting")
			a.notify.Stopping()
			return nil
		}
		select {
		case <-ctx.Done():
			return a.stop()
		case <-a.wake:
		case <-fileChanges:
		case <-jobChanges:
		case <-heartbeat.C:
		case <-resync.C:
		case active, ok := <-shutdown:
			if !ok {
				shutdown = nil
				continue
			}
			a.onShutdown(ctx, active)
		}
	}
}

// watchShutdown takes the delay inhibitor and subscribes to logind's
// PrepareForShutdown; nil without logind.
func (a *Agent) watchShutdown(ctx context.Context) <-chan bool {
	if a.login1 == nil {
		return nil
	}
	// Subscribe before taking the delay lock: a shutdown that starts in
	// between is then seen, not missed.
	c, err := a.login1.PrepareForShutdown(ctx)
	if err != nil {
		a.log.Warn("cannot follow shutdowns; a reboot will not be recorded before it happens", "err", err)
		return nil
	}
	if err := a.delay.Take(ctx); err != nil {
		a.log.Warn("cannot take the delay inhibitor lock", "err", err)
	}
	return c
}

// onShutdown records that the host is going down (Rebooting, with an
// Event), then lets it go by releasing the delay lock. The lock, the cordon
// and the files stay: after the boot the agent continues from them.
func (a *Agent) onShutdown(ctx context.Context, active bool) {
	if !active { // the shutdown was cancelled
		a.shuttingDown = false
		if err := a.delay.Take(ctx); err != nil {
			a.log.Warn("cannot take the delay inhibitor lock again", "err", err)
		}
		a.poke()
		return
	}
	a.shuttingDown = true
	a.stopDrain()
	defer a.delay.Release()
	o, node, err := a.observe()
	if err != nil || Derive(o) == lock.Idle {
		return
	}
	a.log.Info("the host is shutting down; recording it")
	if err := a.publish(ctx, lock.Rebooting, o, node, "rebooting: the host is going down while holding its place"); err != nil {
		a.log.Warn("could not record the reboot", "err", err)
	}
}

// stop ends a running drain and tells systemd. The state stays as it is in
// the cluster and on disk; the next start continues from there.
func (a *Agent) stop() error {
	a.notify.Stopping()
	a.stopDrain()
	if a.block != nil {
		a.block.Release()
		a.delay.Release()
	}
	return nil
}

// waitForAPI waits, with backoff, until the API server answers, then checks
// the objects the agent cannot work without.
func (a *Agent) waitForAPI(ctx context.Context) error {
	backoff := newBackoff(500*time.Millisecond, 30*time.Second)
	for {
		_, err := a.kube.Discovery().ServerVersion()
		if err == nil {
			break
		}
		delay := backoff.Next()
		a.setStatus(fmt.Sprintf("waiting for the API server, retrying in %s: %v", delay.Round(100*time.Millisecond), err))
		a.log.Warn("API server unreachable", "err", err, "retry_in", delay)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(delay):
		}
	}
	_, err := a.kube.CoreV1().Namespaces().Get(ctx, a.cfg.Namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return permanent(fmt.Errorf("namespace %q does not exist: Kustodian is not installed there (run kustodian-ctl install, or set --namespace)", a.cfg.Namespace))
	}
	if err != nil && !apierrors.IsForbidden(err) { // a node identity may not read namespaces
		return fmt.Errorf("reading namespace %s: %w", a.cfg.Namespace, err)
	}
	// What a node identity may do there says whether it was installed there.
	_, err = a.kube.CoordinationV1().Leases(a.cfg.Namespace).List(ctx, metav1.ListOptions{Limit: 1})
	if apierrors.IsForbidden(err) {
		return permanent(fmt.Errorf("may not read the Leases of namespace %q: Kustodian is not installed there for these credentials (run kustodian-ctl install -n %s and kustodian-ctl kubeconfig, or set --namespace)", a.cfg.Namespace, a.cfg.Namespace))
	}
	if err != nil {
		return fmt.Errorf("reading the Leases of namespace %s: %w", a.cfg.Namespace, err)
	}
	_, err = a.kube.CoreV1().Nodes().Get(ctx, a.node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return permanent(fmt.Errorf("node %q does not exist in the cluster; set --node-name to this host's Node name", a.node))
	}
	if err != nil {
		return fmt.Errorf("reading node %s: %w", a.node, err)
	}
	return nil
}

func (a *Agent) startInformers(ctx context.Context) error {
	ns := informers.NewSharedInformerFactoryWithOptions(a.kube, 0, informers.WithNamespace(a.cfg.Namespace))
	leaseInformer := ns.Coordination().V1().Leases().Informer()
	control := informers.NewSharedInformerFactoryWithOptions(a.kube, 0, informers.WithNamespace(a.cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", lock.ControlConfigMap).String()
		}))
	controlInformer := control.Core().V1().ConfigMaps().Informer()
	self := informers.NewSharedInformerFactoryWithOptions(a.kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", a.node).String()
		}))
	nodeInformer := self.Core().V1().Nodes().Informer()

	poke := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { a.poke() },
		UpdateFunc: func(any, any) { a.poke() },
		DeleteFunc: func(any) { a.poke() },
	}
	// Lease updates that only renew a heartbeat change no decision; the
	// heartbeat and resync ticks notice records going stale.
	leaseHandler := cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { a.poke() },
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*coordv1.Lease)
			n, ok2 := newObj.(*coordv1.Lease)
			if ok1 && ok2 && lock.IsRecordName(n.Name) && heartbeatOnly(o, n) {
				return
			}
			a.poke()
		},
		DeleteFunc: func(any) { a.poke() },
	}
	regs := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{{leaseInformer, leaseHandler}, {controlInformer, poke}, {nodeInformer, poke}}
	synced := []cache.InformerSynced{leaseInformer.HasSynced, controlInformer.HasSynced, nodeInformer.HasSynced}
	factories := []informers.SharedInformerFactory{ns, control, self}
	if a.kured != nil {
		k := informers.NewSharedInformerFactoryWithOptions(a.kube, 0, informers.WithNamespace(a.kured.Namespace),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", a.kured.Name).String()
			}))
		kuredInformer := k.Apps().V1().DaemonSets().Informer()
		regs = append(regs, struct {
			inf cache.SharedIndexInformer
			h   cache.ResourceEventHandler
		}{kuredInformer, poke})
		synced = append(synced, kuredInformer.HasSynced)
		a.kuredStore = kuredInformer.GetStore()
		factories = append(factories, k)
	}
	for _, reg := range regs {
		if _, err := reg.inf.AddEventHandler(reg.h); err != nil {
			return err
		}
	}
	for _, f := range factories {
		f.Start(ctx.Done())
	}
	a.setStatus("starting: reading the cluster")
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("the informers did not sync")
	}
	a.rawLeases = leaseInformer.GetStore()
	a.leases = newLeaseView(a.rawLeases, a.cfg.Namespace)
	a.controlStore = controlInformer.GetStore()
	a.nodeStore = nodeInformer.GetStore()
	return nil
}

// heartbeatOnly reports whether a record update changed nothing but its
// renewTime.
func heartbeatOnly(o, n *coordv1.Lease) bool {
	if len(o.Annotations) != len(n.Annotations) {
		return false
	}
	for k, v := range o.Annotations {
		if n.Annotations[k] != v {
			return false
		}
	}
	return lock.Holder(o) == lock.Holder(n) && o.Spec.AcquireTime.Equal(n.Spec.AcquireTime)
}

func (a *Agent) cachedNode() *corev1.Node {
	obj, ok, err := a.nodeStore.GetByKey(a.node)
	if err != nil || !ok {
		return nil
	}
	n, _ := obj.(*corev1.Node)
	return n
}

// paused reads the control ConfigMap.
func (a *Agent) paused() (bool, string) {
	obj, ok, err := a.controlStore.GetByKey(a.cfg.Namespace + "/" + lock.ControlConfigMap)
	if err != nil || !ok {
		return false, ""
	}
	cm, _ := obj.(*corev1.ConfigMap)
	return lock.Paused(cm)
}

// lockNames are the Leases of this node's group.
func (a *Agent) lockNames() []string {
	names := make([]string, a.cfg.Lock.Slots)
	for i := range names {
		names[i] = lock.LockName(a.cfg.Lock.Group, i)
	}
	return names
}

func (a *Agent) heldLocks() []string {
	var held []string
	for _, name := range a.lockNames() {
		if lock.Holder(a.leases.Get(name)) == a.node {
			held = append(held, name)
		}
	}
	return held
}

func (a *Agent) observe() (Observed, *corev1.Node, error) {
	f, err := a.files.Observe()
	if err != nil {
		return Observed{}, nil, permanent(err)
	}
	n := a.cachedNode()
	o := Observed{
		Request:       f.Request,
		InProgress:    f.InProgress,
		RebootPending: f.RebootPending,
		HeldLocks:     a.heldLocks(),
		FailedRequest: a.failedRequest,
	}
	if r := a.myRecord(); r != nil {
		o.ReleasedRequest = r.ReleasedRequest
	}
	if n != nil {
		_, o.CordonedByUs = n.Annotations[drain.AnnotationCordoned]
	}
	return o, n, nil
}

// reconcile takes the next step. done is true when the node is Idle and the
// agent should exit.
func (a *Agent) reconcile(ctx context.Context) (done bool, err error) {
	o, node, err := a.observe()
	if err != nil {
		return false, err
	}
	state := Derive(o)
	if state != lock.Draining {
		a.stopDrain()
	}
	if err := a.renewLocks(ctx, o.HeldLocks); err != nil {
		return false, err
	}
	a.inhibitFor(ctx, state)
	if state != lock.Waiting {
		a.blocked = ""
	}
	switch state {
	case lock.Idle:
		return !a.cfg.Stay, a.idle(ctx, node)
	case lock.Waiting:
		return false, a.waiting(ctx, o, node)
	case lock.Draining:
		return false, a.draining(ctx, o, node)
	case lock.Failed:
		if o.Released() {
			return false, a.released(ctx, o, node)
		}
		return false, a.publish(ctx, lock.Failed, o, node, a.failure)
	case lock.InMaintenance:
		return false, a.inMaintenance(ctx, o, node)
	case lock.Completing:
		return false, a.completing(ctx, o, node)
	}
	return false, fmt.Errorf("unknown state %s", state)
}

// kuredLock reads Kured's lock from the cache; ok is false when Kured's
// DaemonSet is absent or kured.enabled is false.
func (a *Agent) kuredLock() (kured.Lock, bool) {
	if a.kuredStore == nil {
		return kured.Lock{}, false
	}
	obj, exists, err := a.kuredStore.GetByKey(a.kured.Namespace + "/" + a.kured.Name)
	if err != nil || !exists {
		return kured.Lock{}, false
	}
	ds, _ := obj.(*appsv1.DaemonSet)
	if ds == nil {
		return kured.Lock{}, false
	}
	l, err := kured.ParseLock(ds.Annotations[kured.LockAnnotation])
	if err != nil {
		a.log.Warn("Kured's lock is unreadable; treating it as held", "err", err)
		return kured.Lock{MaxOwners: 1, Holders: []kured.Holder{{NodeID: "(unreadable)"}}}, true
	}
	return l, true
}

// kuredBlocks says why Kured's lock keeps this node from taking its turn:
// a node (not a Kustodian agent) holds it and it has no room.
func (a *Agent) kuredBlocks() string {
	l, ok := a.kuredLock()
	if !ok {
		return ""
	}
	me, now := kured.HolderID(a.node), a.now()
	if !l.Full(me, now) {
		return ""
	}
	var rebooting []string
	for _, h := range l.Others(me, now) {
		if !strings.HasPrefix(h, "kustodian:") {
			rebooting = append(rebooting, h)
		}
	}
	if len(rebooting) == 0 {
		return ""
	}
	return "Kured's lock is held by " + strings.Join(rebooting, ", ")
}

// holdKured takes Kured's lock for this node while it holds its own, so
// that Kured reboots no other node meanwhile. false: Kured's lock is taken.
func (a *Agent) holdKured(ctx context.Context) (bool, string, error) {
	l, ok := a.kuredLock()
	if !ok {
		return true, "", nil
	}
	me := kured.HolderID(a.node)
	for _, h := range l.Active(a.now()) {
		if h.NodeID == me {
			return true, "", nil
		}
	}
	return a.kured.Acquire(ctx, me)
}

func (a *Agent) releaseKured(ctx context.Context) error {
	l, ok := a.kuredLock()
	if !ok {
		return nil
	}
	held := false
	for _, h := range l.Holders {
		held = held || h.NodeID == kured.HolderID(a.node)
	}
	if !held {
		return nil
	}
	if err := a.kured.Release(ctx, kured.HolderID(a.node)); err != nil && !apierrors.IsForbidden(err) {
		return fmt.Errorf("releasing Kured's lock: %w", err)
	}
	return nil
}

// inhibitFor holds the block inhibitor while Draining and Completing.
func (a *Agent) inhibitFor(ctx context.Context, state lock.State) {
	if a.block == nil {
		return
	}
	if state == lock.Draining || state == lock.Completing {
		if err := a.block.Take(ctx); err != nil {
			a.log.Warn("cannot take the block inhibitor lock", "err", err)
		}
		return
	}
	a.block.Release()
}

// renewLocks keeps locks with a TTL from expiring while this node holds
// them: once a heartbeat.
func (a *Agent) renewLocks(ctx context.Context, held []string) error {
	if a.cfg.Lock.TTL == 0 || len(held) == 0 || a.now().Sub(a.lastRenew) < a.cfg.Queue.Heartbeat*9/10 {
		return nil
	}
	for _, name := range held {
		l, err := a.locks.Renew(ctx, name, a.node)
		if errors.Is(err, lock.ErrNotHeld) {
			a.log.Warn("lost the lock: it expired and another node took it", "lock", name)
			a.poke()
			continue
		}
		if err != nil {
			return err
		}
		a.leases.Wrote(l)
	}
	a.lastRenew = a.now()
	return nil
}

func (a *Agent) myRecordLease() *coordv1.Lease { return a.leases.Get(lock.RecordName(a.node)) }

func (a *Agent) myRecord() *lock.Record {
	l := a.myRecordLease()
	if l == nil {
		return nil
	}
	r := lock.RecordFromLease(l)
	return &r
}

// idle cleans up what a finished cycle may have left: the record and the
// node's state label.
func (a *Agent) idle(ctx context.Context, node *corev1.Node) error {
	a.failedRequest, a.failure = "", ""
	if node != nil {
		if err := a.drainer.SetStateLabel(ctx, node, ""); err != nil {
			return err
		}
	}
	if l := a.myRecordLease(); l != nil {
		prev := lock.RecordFromLease(l)
		if err := a.locks.DeleteRecord(ctx, a.node); err != nil {
			return err
		}
		a.leases.Deleted(l.Name, l.ResourceVersion)
		if prev.State == lock.Completing && node != nil {
			a.event(ctx, node.UID, corev1.EventTypeNormal, ReasonMaintenanceCompleted, "maintenance completed; node is back in the cluster")
		}
	}
	a.setStatus("idle: no maintenance requested")
	return nil
}

func (a *Agent) waiting(ctx context.Context, o Observed, node *corev1.Node) error {
	if o.InProgress {
		// Left from an interrupted cycle: it must not tell a script to go
		// ahead while this node does not hold the lock.
		if err := a.files.RemoveInProgress(); err != nil {
			return err
		}
	}
	if paused, reason := a.paused(); paused {
		msg := "waiting: maintenance is paused"
		if reason != "" {
			msg += ": " + reason
		}
		return a.publish(ctx, lock.Waiting, o, node, msg)
	}
	if node == nil {
		// A lock taken now would belong to no Node (a node-bound token
		// dies with its Node, and the lock with it).
		return a.publish(ctx, lock.Waiting, o, node, "waiting: this host's Node object does not exist; it may not take the lock until the Node is back")
	}
	// Its own gates: Kured rebooting a node.
	a.blocked = a.kuredBlocks()
	if a.blocked != "" {
		return a.publish(ctx, lock.Waiting, o, node, "waiting: "+a.blocked+" (a Kured reboot goes first)")
	}
	// Join the queue first: this node must be in the queue it reads.
	if r := a.myRecord(); r == nil || r.State != lock.Waiting || r.Blocked != "" {
		if err := a.publish(ctx, lock.Waiting, o, node, a.waitingMessage(0, 0, "")); err != nil {
			return err
		}
	}
	now := a.now()
	var records []lock.Record
	for _, l := range a.leases.List() {
		if lock.IsRecordName(l.Name) {
			records = append(records, lock.RecordFromLease(l))
		}
	}
	queue := lock.Queue(records, a.cfg.Lock.Group, now, a.cfg.Queue.StaleAfter())
	pos, total := lock.Position(queue, a.node)

	var free []string
	var holders []string
	params := lock.Params{StaleAfter: a.cfg.Queue.StaleAfter(), TTL: a.cfg.Lock.TTL, Owner: a.owner}
	for _, name := range a.lockNames() {
		l := a.leases.Get(name)
		facts, err := a.holderFacts(ctx, lock.Holder(l))
		if err != nil {
			return err
		}
		v := lock.Decide(l, a.node, facts, now, params)
		if v.Free {
			free = append(free, name)
		} else {
			holders = append(holders, a.describeHolder(lock.Holder(l)))
		}
	}
	// Only the heads of the queue try. A record in the cache itself (not
	// only in this agent's overlay) proves that the cache has seen every
	// record that reached the API server before this one: no earlier request
	// can be missing from the queue read above.
	_, inCache, _ := a.rawLeases.GetByKey(a.cfg.Namespace + "/" + lock.RecordName(a.node))
	if inCache && lock.MayTry(queue, a.node, len(free)) {
		for _, name := range free {
			l, v, err := a.locks.Acquire(ctx, name, a.node, a.leases.Get(name), params, a.holderFacts)
			if err != nil {
				return err
			}
			if l != nil {
				a.leases.Wrote(l)
				if ok, why, err := a.holdKured(ctx); err != nil || !ok {
					// Kured took its lock meanwhile: give ours back and wait.
					released, rerr := a.locks.Release(ctx, name, a.node)
					if rerr != nil {
						return rerr
					}
					a.leases.Wrote(released)
					if err != nil {
						return err
					}
					a.log.Info("Kured's lock is taken; gave the lock back", "why", why)
					return nil
				}
				a.log.Info("lock acquired", "lock", name, "note", v.Why)
				a.poke() // go on to Draining at once
				return nil
			}
			a.log.Debug("lock not acquired", "lock", name, "why", v.Why)
		}
	}
	return a.publish(ctx, lock.Waiting, o, node, a.waitingMessage(pos, total, strings.Join(holders, ", ")))
}

func (a *Agent) waitingMessage(pos, total int, holders string) string {
	if pos == 0 {
		return "waiting: joining the queue"
	}
	msg := fmt.Sprintf("waiting: position %d of %d", pos, total)
	if holders != "" {
		msg += ", lock held by " + holders
	}
	return msg
}

// describeHolder names a lock holder and, from its record, what it does.
func (a *Agent) describeHolder(holder string) string {
	l := a.leases.Get(lock.RecordName(holder))
	if l == nil {
		return holder
	}
	r := lock.RecordFromLease(l)
	if r.State == "" {
		return holder
	}
	s := fmt.Sprintf("%s (%s", holder, r.State)
	if !r.Since.IsZero() {
		s += " for " + a.now().Sub(r.Since).Round(time.Second).String()
	}
	return s + ")"
}

// holderFacts tells whether a lock's holder still counts: its record from
// the cache, and whether its Node exists (read from the API, at most once a
// heartbeat per holder, and only when its record is not live).
func (a *Agent) holderFacts(ctx context.Context, holder string) (lock.HolderFacts, error) {
	if holder == "" {
		return lock.HolderFacts{}, nil
	}
	var f lock.HolderFacts
	if l := a.leases.Get(lock.RecordName(holder)); l != nil {
		r := lock.RecordFromLease(l)
		f.Record = &r
	}
	now := a.now()
	if f.Record != nil && f.Record.Live(now, a.cfg.Queue.StaleAfter()) {
		f.NodeExists = true // does not matter: a live holder keeps its lock
		return f, nil
	}
	if c, ok := a.holderNodes[holder]; ok && now.Sub(c.at) < a.cfg.Queue.Heartbeat {
		f.NodeExists = c.exists
		return f, nil
	}
	_, err := a.kube.CoreV1().Nodes().Get(ctx, holder, metav1.GetOptions{})
	switch {
	case err == nil:
		f.NodeExists = true
	case apierrors.IsNotFound(err):
		f.NodeExists = false
	default:
		return f, fmt.Errorf("reading node %s, holder of the lock: %w", holder, err)
	}
	a.holderNodes[holder] = nodeCheck{exists: f.NodeExists, at: now}
	return f, nil
}

func (a *Agent) draining(ctx context.Context, o Observed, node *corev1.Node) error {
	if node == nil {
		// Keep the lock: the host is alive, and the Node may come back.
		return fmt.Errorf("node %s does not exist, but this host holds the lock; waiting for the Node to return", a.node)
	}
	if ok, why, err := a.holdKured(ctx); err != nil {
		return err
	} else if !ok {
		a.log.Warn("holding this node's lock without Kured's", "why", why)
	}
	byAdmin, err := a.drainer.Cordon(ctx, node)
	if err != nil {
		return err
	}
	if byAdmin {
		a.log.Info("node was already cordoned by someone else; it stays cordoned after maintenance")
	}

	a.mu.Lock()
	run := a.drain
	a.mu.Unlock()
	if run != nil && run.request != o.Request.ID {
		a.stopDrain() // a drain for an older request
		run = nil
	}
	if run == nil {
		if err := a.publish(ctx, lock.Draining, o, node, "cordoned; draining"); err != nil {
			return err
		}
		run = a.startDrain(ctx, o.Request.ID)
	}
	select {
	case <-run.done:
	default:
		return a.publish(ctx, lock.Draining, o, node, "cordoned; "+a.drainProgress(run))
	}
	a.mu.Lock()
	a.drain = nil
	a.mu.Unlock()
	if run.err != nil {
		return a.drainFailed(ctx, o, node, run.err)
	}
	// Drained: tell the script to go ahead. The in-progress file is created
	// only now that the node is cordoned and every pod that must leave has left.
	if err := a.files.CreateInProgress(a.node + "\n"); err != nil {
		return permanent(err)
	}
	o.InProgress = true
	a.event(ctx, node.UID, corev1.EventTypeNormal, ReasonDrained, "node cordoned and drained")
	return a.inMaintenance(ctx, o, node)
}

func (a *Agent) drainProgress(run *drainRun) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if run.progress == "" {
		return "draining"
	}
	return run.progress
}

func (a *Agent) startDrain(ctx context.Context, request string) *drainRun {
	dctx, cancel := context.WithCancel(ctx)
	run := &drainRun{request: request, cancel: cancel, done: make(chan struct{})}
	a.mu.Lock()
	a.drain = run
	a.mu.Unlock()
	go func() {
		defer close(run.done)
		defer a.poke()
		run.err = a.drainer.Drain(dctx, a.node, func(p drain.Progress) {
			a.mu.Lock()
			run.progress = p.Message
			a.mu.Unlock()
			a.poke()
		})
	}()
	return run
}

// stopDrain cancels a running drain and waits for it to end.
func (a *Agent) stopDrain() {
	a.mu.Lock()
	run := a.drain
	a.drain = nil
	a.mu.Unlock()
	if run != nil {
		run.cancel()
		<-run.done
	}
}

func (a *Agent) drainFailed(ctx context.Context, o Observed, node *corev1.Node, err error) error {
	a.event(ctx, node.UID, corev1.EventTypeWarning, ReasonMaintenanceFailed, "drain failed: "+err.Error())
	if a.cfg.Drain.OnTimeout == config.OnTimeoutRelease && errors.Is(err, drain.ErrTimeout) {
		// Give the node back and queue again at the back.
		a.log.Warn("drain failed; giving the node back and queueing again", "err", err)
		if err := a.giveBack(ctx, node); err != nil {
			return err
		}
		if l := a.myRecordLease(); l != nil {
			if err := a.locks.DeleteRecord(ctx, a.node); err != nil {
				return err
			}
			a.leases.Deleted(l.Name, l.ResourceVersion)
		}
		return nil
	}
	a.log.Error("drain failed; holding the lock and the cordon until an admin acts", "err", err)
	a.failedRequest = o.Request.ID
	a.failure = fmt.Sprintf("drain failed: %v; the lock and the cordon are held (fix the cause, then restart the agent to drain again, or release the lock)", err)
	return a.publish(ctx, lock.Failed, o, node, a.failure)
}

// released: an admin broke this node's lock. The script must not go on, the
// node stays cordoned, and this request is not queued again.
func (a *Agent) released(ctx context.Context, o Observed, node *corev1.Node) error {
	if err := a.releaseKured(ctx); err != nil {
		return err
	}
	if o.InProgress {
		if err := a.files.RemoveInProgress(); err != nil {
			return permanent(err)
		}
	}
	return a.publish(ctx, lock.Failed, o, node, "lock released by an admin; remove "+a.cfg.RequestFile+" once the node is repaired (a new request starts over)")
}

func (a *Agent) inMaintenance(ctx context.Context, o Observed, node *corev1.Node) error {
	if node != nil && !node.Spec.Unschedulable {
		// Someone uncordoned the node mid-maintenance: cordon it again.
		if _, err := a.drainer.Cordon(ctx, node); err != nil {
			return err
		}
	}
	job, err := a.jobs.Current()
	if err != nil {
		return permanent(err)
	}
	if job == nil {
		return a.publish(ctx, lock.InMaintenance, o, node, "in maintenance: waiting for the script to remove "+a.cfg.RequestFile)
	}
	msg, failed, err := a.stepJob(ctx, job, o.RebootPending)
	if err != nil {
		return err
	}
	if failed {
		return a.publish(ctx, lock.Failed, o, node, msg)
	}
	return a.publish(ctx, lock.InMaintenance, o, node, "in maintenance: "+msg)
}

func (a *Agent) completing(ctx context.Context, o Observed, node *corev1.Node) error {
	if err := a.publish(ctx, lock.Completing, o, node, "completing: uncordoning and releasing the lock"); err != nil {
		return err
	}
	if err := a.files.RemoveInProgress(); err != nil {
		return permanent(err)
	}
	// The maintenance is over: a job that failed is history now, not the
	// job of the next request.
	if err := a.jobs.ClearCurrent(); err != nil {
		return permanent(err)
	}
	if err := a.giveBack(ctx, node); err != nil {
		return err
	}
	a.poke() // on to Idle
	return nil
}

// giveBack uncordons the node (unless an admin had cordoned it) and releases
// this node's locks.
func (a *Agent) giveBack(ctx context.Context, node *corev1.Node) error {
	if node != nil {
		if err := a.drainer.Uncordon(ctx, node); err != nil && !apierrors.IsNotFound(errors.Unwrap(err)) {
			return err
		}
	}
	for _, name := range a.heldLocks() {
		l, err := a.locks.Release(ctx, name, a.node)
		if err != nil {
			return err
		}
		a.leases.Wrote(l)
		if node != nil {
			a.event(ctx, node.UID, corev1.EventTypeNormal, ReasonLockReleased, "released lock "+name)
		}
		a.log.Info("lock released", "lock", name)
	}
	return a.releaseKured(ctx)
}

// publish writes the node record (when something changed, or a heartbeat is
// due), the node's state label, the Events of a transition, and STATUS.
func (a *Agent) publish(ctx context.Context, state lock.State, o Observed, node *corev1.Node, message string) error {
	now := a.now()
	base := a.myRecordLease()
	var prev lock.Record
	if base != nil {
		prev = lock.RecordFromLease(base)
	}
	r := lock.Record{
		Node:      a.node,
		State:     state,
		Since:     prev.Since,
		Message:   message,
		Group:     a.cfg.Lock.Group,
		Priority:  a.cfg.Queue.Priority,
		QueueKey:  prev.QueueKey,
		Requested: prev.Requested,
		Heartbeat: now,
		Blocked:   a.blocked,

		ReleasedRequest: prev.ReleasedRequest,
	}
	if o.Request != nil {
		r.Reason, r.RequestID = o.Request.Reason, o.Request.ID
	}
	if prev.State != state || r.Since.IsZero() {
		r.Since = now.Truncate(time.Second)
	}
	if r.Requested.IsZero() {
		r.Requested = now
	}
	due := now.Sub(prev.Heartbeat) >= a.cfg.Queue.Heartbeat*9/10
	if base == nil || due || !sameRecord(prev, r) {
		// A new record has no QueueKey: until the next write stores it, the
		// record's own resourceVersion, that of its creation, stands for it.
		written, err := a.locks.PutRecord(ctx, base, r)
		if err != nil {
			return err
		}
		a.leases.Wrote(written)
	}
	if node != nil {
		if err := a.drainer.SetStateLabel(ctx, node, string(state)); err != nil {
			return err
		}
		if prev.State != state {
			a.transitionEvents(ctx, node, prev.State, state, r)
		}
	}
	if prev.State != state {
		a.log.Info("state", "from", orIdle(prev.State), "to", state, "message", message)
	}
	a.setStatus(a.statusLine(state, r))
	return nil
}

func orIdle(s lock.State) lock.State {
	if s == "" {
		return lock.Idle
	}
	return s
}

// sameRecord compares what is worth a write.
func sameRecord(a, b lock.Record) bool {
	return a.State == b.State && a.Message == b.Message && a.Reason == b.Reason && a.RequestID == b.RequestID &&
		a.Group == b.Group && a.Priority == b.Priority && a.Blocked == b.Blocked && a.Since.Equal(b.Since) &&
		a.QueueKey == b.QueueKey && a.ReleasedRequest == b.ReleasedRequest
}

func (a *Agent) transitionEvents(ctx context.Context, node *corev1.Node, from, to lock.State, r lock.Record) {
	switch to {
	case lock.Waiting:
		if from == "" || from == lock.Idle {
			msg := "maintenance requested"
			if r.Reason != "" {
				msg += ": " + r.Reason
			}
			a.event(ctx, node.UID, corev1.EventTypeNormal, ReasonMaintenanceRequested, msg)
		}
	case lock.Draining:
		a.event(ctx, node.UID, corev1.EventTypeNormal, ReasonLockAcquired, "acquired the maintenance lock; cordoning and draining")
	case lock.InMaintenance:
		a.event(ctx, node.UID, corev1.EventTypeNormal, ReasonMaintenanceStarted, "the maintenance script may proceed")
	case lock.Rebooting:
		a.event(ctx, node.UID, corev1.EventTypeNormal, ReasonRebooting, "the host is rebooting; the lock stays held")
	case lock.Failed:
		// drainFailed sent MaintenanceFailed with the cause.
	}
}

// statusLine is systemd's STATUS: "waiting: position 3 of 7", "draining: 4
// pods left", "in maintenance for 5m".
func (a *Agent) statusLine(state lock.State, r lock.Record) string {
	switch state {
	case lock.InMaintenance:
		return fmt.Sprintf("in maintenance for %s", a.now().Sub(r.Since).Round(time.Second))
	case lock.Draining:
		return strings.TrimPrefix(r.Message, "cordoned; ")
	default:
		return r.Message
	}
}

func (a *Agent) setStatus(line string) {
	if line == a.status {
		return
	}
	a.status = line
	a.notify.Status(line)
}
