package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/policy"
	"github.com/kustodian/kustodian/internal/request"
	"github.com/kustodian/kustodian/internal/rollout"
)

// untilStarted runs start (StartBackoff) until it succeeds. Only a
// permanent error (Kustodian not installed, the Node missing, the eviction
// right refused) ends it, and a stop, which is no error: a busy API server (429), one that times out or goes
// away meanwhile is asked again, as a starting fleet on a loaded control
// plane finds it.
func (a *Agent) untilStarted(ctx context.Context, start func(context.Context) error) error {
	backoff := StartBackoff()
	var said RepeatLog
	for {
		err := start(ctx)
		if ctx.Err() != nil {
			return nil // stopped while it started
		}
		var perm *PermanentError
		if err == nil || errors.As(err, &perm) {
			return err
		}
		delay := backoff.Step()
		a.setStatus(fmt.Sprintf("waiting for the API server, retrying in %s: %v", delay.Round(100*time.Millisecond), err))
		if said.Due(err, a.now()) {
			a.log.Warn("API server unreachable or not ready; asking again every 2 s or so, this said again every 30 s", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-a.clock.After(delay):
		}
	}
}

// startReading is the agent's start: the API server ready, the objects it
// cannot work without there, and its informers filled.
func (a *Agent) startReading(ctx context.Context) error {
	if err := a.apiReady(ctx); err != nil {
		return err
	}
	return a.startInformers(ctx, false)
}

// apiReady is one look at whether the agent can start: the API server
// ready, not just answering (right after a start it serves /version
// before its authorizer has read the RBAC, and refuses everything
// meanwhile), then the objects the agent cannot work without.
func (a *Agent) apiReady(ctx context.Context) error {
	if err := a.readyz(ctx); err != nil {
		var status apierrors.APIStatus
		if errors.As(err, &status) { // its body lists every check
			err = fmt.Errorf("the API server is up but not ready yet (HTTP %d from /readyz)", status.Status().Code)
		}
		return err
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
	return a.checkEvictor(ctx)
}

// errAwayAgain: the API server went away while the informers read the
// cluster; errRefused: it answers, but refused a list (its authorizer has
// not read the RBAC yet, right after a restart). startInformers returns
// them only when asked to (back).
var (
	errAwayAgain = errors.New("the API server went away again while the agent read the cluster")
	errRefused   = errors.New("the API server refused to list while the agent read the cluster")
)

// startInformers starts the watches and waits until they have read the
// cluster. back: the agent comes back after an outage. The wait then ends
// with errAwayAgain or errRefused as soon as a watch fails, rather than
// waiting on the informers' own backoff, which after a few refusals grows
// to 30 s; the new informers are stopped, and rideOut tries again.
func (a *Agent) startInformers(ctx context.Context, back bool) error {
	if back {
		select { // a failure the last informers told of is over
		case <-a.signals.watchBroken:
		default:
		}
	}
	var (
		synced []cache.InformerSynced
		starts []func(<-chan struct{})
		regErr error
		byName = func(name string) informers.SharedInformerOption {
			return tweaked(func(o *metav1.ListOptions) {
				o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
			})
		}
	)
	watch := func(inf cache.SharedIndexInformer, h cache.ResourceEventHandler, start func(<-chan struct{})) cache.Store {
		// managedFields are what a writer says of itself, unbounded by
		// the admission policies (a compromised node may send megabytes
		// of them with a Lease it writes): nothing here reads them, and
		// an update without them keeps the stored ones.
		if err := inf.SetTransform(stripManagedFields); err != nil && regErr == nil {
			regErr = err
		}
		if _, err := inf.AddEventHandler(h); err != nil && regErr == nil {
			regErr = err
		}
		if err := inf.SetWatchErrorHandlerWithContext(a.watchError); err != nil && regErr == nil {
			regErr = err
		}
		synced = append(synced, inf.HasSynced)
		starts = append(starts, start)
		return inf.GetStore()
	}
	h := a.handlers()
	// The group Leases' informer starts and stops on its own (farback.go).
	groups, groupInf := a.groupInformer()
	groupLeases := watch(groupInf, h.groupLeases, func(<-chan struct{}) {})
	mine := informers.NewSharedInformerFactoryWithOptions(a.kube, 0, informers.WithNamespace(a.cfg.Namespace), byName(lock.RecordName(a.node)))
	ownRecord := watch(mine.Coordination().V1().Leases().Informer(), h.ownRecord, mine.Start)
	control := informers.NewSharedInformerFactoryWithOptions(a.kube, 0, informers.WithNamespace(a.cfg.Namespace), byName(lock.ControlConfigMap))
	controlStore := watch(control.Core().V1().ConfigMaps().Informer(), h.other, control.Start)
	self := informers.NewSharedInformerFactoryWithOptions(a.kube, 0, byName(a.node))
	nodeStore := watch(self.Core().V1().Nodes().Informer(), h.other, self.Start)
	var kuredStore, policyStore cache.Store
	if a.kured.locker != nil {
		k := informers.NewSharedInformerFactoryWithOptions(a.kube, 0, informers.WithNamespace(a.kured.ds.Namespace), byName(a.kured.ds.Name))
		kuredStore = watch(k.Apps().V1().DaemonSets().Informer(), h.other, k.Start)
	}
	// The pods on this node, for the policy's pod blockers.
	pods := informers.NewSharedInformerFactoryWithOptions(a.kube, 0,
		tweaked(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", a.node).String()
		}))
	podStore := watch(pods.Core().V1().Pods().Informer(), h.other, pods.Start)
	if installed, err := a.policiesInstalled(ctx); err != nil {
		return err
	} else if installed {
		pf := dynamicinformer.NewFilteredDynamicSharedInformerFactory(a.caches.dyn, 0, a.cfg.Namespace, longWatch)
		policyStore = watch(pf.ForResource(policy.GVR).Informer(), h.other, pf.Start)
	}
	// This node's MaintenanceRequests (spec.nodeName is a selectable field).
	var requestStore cache.Store
	if installed, err := a.requestsInstalled(ctx); err != nil {
		return err
	} else if installed {
		rq := dynamicinformer.NewFilteredDynamicSharedInformerFactory(a.caches.dyn, 0, metav1.NamespaceAll, func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", a.node).String()
			longWatch(o)
		})
		requestStore = watch(rq.ForResource(request.GVR).Informer(), h.other, rq.Start)
	}
	var rolloutStore, rolloutNodeStore cache.Store
	if a.cfg.Rollouts.Enabled {
		if installed, err := a.rolloutsInstalled(ctx); err != nil {
			return err
		} else if installed {
			// The rollouts' metadata only: each is read whole when it
			// matters to this node (rolloutread.go).
			rf := metadatainformer.NewFilteredSharedInformerFactory(a.caches.meta, 0, a.cfg.Namespace, longWatch)
			rolloutStore = watch(rf.ForResource(rollout.GVR).Informer(), h.rollouts, rf.Start)
			// Which nodes a rollout selects, and when they joined: their
			// metadata only, and a step only when that changes.
			mf := metadatainformer.NewFilteredSharedInformerFactory(a.caches.meta, 0, metav1.NamespaceAll, longWatch)
			rolloutNodeStore = watch(mf.ForResource(corev1.SchemeGroupVersion.WithResource("nodes")).Informer(), h.nodeLabels, mf.Start)
		}
	}
	if regErr != nil {
		return regErr
	}
	ictx, stop := context.WithCancel(ctx)
	for _, start := range starts {
		start(ictx.Done())
	}
	// Stopped with the others (ictx), or alone by a sleep far back.
	groupWatch := &informerGroups{a: a, parent: ictx}
	var gctx context.Context
	gctx, groupWatch.cancel = context.WithCancel(ictx)
	groups.Start(gctx.Done())
	a.setStatus("starting: reading the cluster")
	if back {
		if err := a.waitSynced(ictx, synced); err != nil {
			stop()
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	} else if !cache.WaitForCacheSync(ictx.Done(), synced...) {
		stop()
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("the informers did not sync")
	}
	if a.caches.stop != nil {
		a.caches.stop() // those this start replaces
	}
	a.caches.stop = stop
	a.useCaches(caches{groupLeases: groupLeases, ownRecord: ownRecord, control: controlStore, node: nodeStore,
		kured: kuredStore, pods: podStore, policies: policyStore, rollouts: rolloutStore, rolloutNodes: rolloutNodeStore, requests: requestStore})
	a.queue.far.watcher = groupWatch
	return nil
}

// waitSynced waits until every informer has read the cluster, or a watch
// fails: errAwayAgain if the API server does not answer, errRefused if it
// does.
func (a *Agent) waitSynced(ctx context.Context, synced []cache.InformerSynced) error {
	tick := a.clock.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		done := true
		for _, s := range synced {
			done = done && s()
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C():
		case <-a.signals.watchBroken:
			if err := a.readyz(ctx); err != nil {
				return fmt.Errorf("%w: %v", errAwayAgain, err)
			}
			return errRefused
		}
	}
}

// A watch an informer makes ends after watchTimeout to twice that, and
// the informer makes it again (a request). client-go's own 5 to 10 minutes
// made the re-established watches a third of a waiting fleet's requests
// (docs/performance.md); an agent's watches carry little and need no
// rebalancing between API servers that often.
const watchTimeout = 30 * time.Minute

// longWatch makes a watch's timeout watchTimeout to twice that: the
// reflector sets TimeoutSeconds on its watches only, never on its LISTs.
func longWatch(o *metav1.ListOptions) {
	if o.TimeoutSeconds != nil {
		t := int64((watchTimeout + rand.N(watchTimeout)).Seconds())
		o.TimeoutSeconds = &t
	}
}

// tweaked is an informer factory's list options: f, then longWatch.
func tweaked(f func(*metav1.ListOptions)) informers.SharedInformerOption {
	return informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		f(o)
		longWatch(o)
	})
}

// caches are the stores the agent decides on, each filled by a watch.
type caches struct {
	groupLeases cache.Store // the lock and queue Leases
	ownRecord   cache.Store // this node's record
	control     cache.Store // the control ConfigMap
	node        cache.Store // this node's Node
	kured       cache.Store // Kured's DaemonSet; nil when kured.enabled is false
	pods        cache.Store // the pods on this node
	policies    cache.Store // nil when the MaintenancePolicy CRD is not installed
	// The MaintenanceRollouts and the Nodes' metadata; nil unless
	// rollouts.enabled and the CRD is installed.
	rollouts, rolloutNodes cache.Store
	requests               cache.Store // this node's MaintenanceRequests; nil when not installed
}

// useCaches makes the agent decide on c from now on.
func (a *Agent) useCaches(c caches) {
	a.caches.kured, a.caches.pods, a.caches.policies, a.caches.requests = c.kured, c.pods, c.policies, c.requests
	a.rollouts.store, a.rollouts.nodeStore = c.rollouts, c.rolloutNodes
	a.queue.far.store = &groupStore{cur: c.groupLeases}
	a.queue.far.asleep, a.queue.far.listAt, a.queue.far.lastRV = false, time.Time{}, nil
	a.locks.view = newLeaseView(a.cfg.Namespace, a.queue.far.store, c.ownRecord)
	a.records.view = a.locks.view
	a.queue.watching = a.now()
	a.caches.control = c.control
	a.caches.nodes = c.node
}

// policiesInstalled tells whether the MaintenancePolicy CRD is installed.
// Without it no policy can exist and the built-in default applies; a CRD the
// agent may not read is an installation to fix, never a reason to ignore
// the policies.
func (a *Agent) policiesInstalled(ctx context.Context) (bool, error) {
	if a.caches.dyn == nil {
		return false, nil
	}
	return a.crdInstalled(ctx, policy.GVR, "MaintenancePolicies", slog.LevelInfo,
		"the MaintenancePolicy CRD is not installed; the built-in default policy applies (one node at a time, always)")
}

// rolloutsInstalled tells whether the MaintenanceRollout CRD is installed:
// without it there is no rollout to run.
func (a *Agent) rolloutsInstalled(ctx context.Context) (bool, error) {
	return a.crdInstalled(ctx, rollout.GVR, "MaintenanceRollouts", slog.LevelWarn,
		"rollouts.enabled, but the MaintenanceRollout CRD is not installed (kustodian-ctl install installs it); no rollout can reach this node")
}

// crdInstalled tells whether the API server serves gvr in the namespace,
// logging absent when it does not; a resource the agent may not read is an
// installation older than the agent.
func (a *Agent) crdInstalled(ctx context.Context, gvr schema.GroupVersionResource, kind string, level slog.Level, absent string) (bool, error) {
	_, err := a.caches.dyn.Resource(gvr).Namespace(a.cfg.Namespace).List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		a.log.Log(ctx, level, absent)
		return false, nil
	case apierrors.IsForbidden(err):
		return false, permanent(fmt.Errorf("may not read the %s of namespace %q: the installation is older than this agent (run kustodian-ctl install -n %s)", kind, a.cfg.Namespace, a.cfg.Namespace))
	default:
		return false, fmt.Errorf("reading the %s of namespace %s: %w", kind, a.cfg.Namespace, err)
	}
}

// watchError is told when an informer's list or watch fails. The informer
// retries on its own backoff, which grows to 30 s over a long outage; an
// agent that writes nothing meanwhile (it waits) would learn of the API
// server's return only that late. So a failure other than an expired
// history (which the informer lists again at once) or a closed watch
// makes the Run loop check whether the API server is away (watchBroke).
// A 429 does not: the server that answers it is there, only busy.
func (a *Agent) watchError(ctx context.Context, r *cache.Reflector, err error) {
	cache.DefaultWatchErrorHandler(ctx, r, err)
	if ctx.Err() != nil || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) ||
		apierrors.IsTooManyRequests(err) { // there, busy: the informer's backoff is the right answer
		return
	}
	select {
	case a.signals.watchBroken <- struct{}{}:
	default:
	}
}

// watchBroke: an informer's watch failed. If the API server answers, the
// informer's own retry is enough; if it is slow, the agent waits for it
// to answer; if it is away, the outage is ridden out and the cluster read
// anew when it is back, as after a failed step.
func (a *Agent) watchBroke(ctx context.Context) error {
	err := a.rideOut(ctx, 0)
	// What the old informers said while the API server was away is over.
	select {
	case <-a.signals.watchBroken:
	default:
	}
	return err
}

// stripManagedFields drops an object's managedFields before the informer
// caches it.
func stripManagedFields(obj any) (any, error) {
	if m, err := meta.Accessor(obj); err == nil && m.GetManagedFields() != nil {
		m.SetManagedFields(nil)
	}
	return obj, nil
}
