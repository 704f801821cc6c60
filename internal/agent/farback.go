package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/lock"
)

// A node far back in a fast queue sleeps (docs/agent.md, "Asleep far
// back"): it stops watching the lock and queue Leases, whose every handoff
// would wake it, and reads them with one LIST now and then instead
// (decide.Asleep says when). It watches again when a look finds it near,
// the queue slower, or a lock of its group free behind a queue Lease that
// has not changed since its previous look (the nodes ahead may be gone:
// it sees the takeover through).

// groupWatcher starts and stops the watch of the group Leases (a seam: the
// simulation delivers its own watches).
type groupWatcher interface {
	// watch starts a watch and returns its store once filled.
	watch(ctx context.Context) (cache.Store, error)
	// stop ends the watch.
	stop()
}

// groupStore is the lock and queue Leases as the agent reads them: the
// watch's store while it watches, its own LISTs' while it sleeps.
type groupStore struct {
	mu  sync.RWMutex
	cur cache.Store
}

func (g *groupStore) get() cache.Store {
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.cur
}

func (g *groupStore) set(s cache.Store) {
	g.mu.Lock()
	g.cur = s
	g.mu.Unlock()
}

func (g *groupStore) GetByKey(key string) (any, bool, error) { return g.get().GetByKey(key) }
func (g *groupStore) List() []any                            { return g.get().List() }

// farSide is the agent's sleep far back.
type farSide struct {
	watcher groupWatcher
	store   *groupStore
	asleep  bool
	listAt  time.Time // asleep: when it LISTs next
	// awakeUntil: a look found a lock free behind an unchanged queue
	// Lease; the agent watches at least until the takeover is due.
	awakeUntil time.Time
	// lastRV are the queue Leases' versions at the last look; looked:
	// the store is as fresh as that look (asleep, it is fresh only then).
	lastRV map[string]string
	looked bool
	// soon: the last look found a lock free; the next comes two and a
	// half heartbeats after it (a head that waits renews the queue Lease
	// every two), to see whether the queue moved meanwhile.
	soon bool
	// retryAt: a watch that could not start is tried again then.
	retryAt time.Time
	// pace is how many places per second the queue moves, as measured
	// between the summaries seen at sample.at and the one after it.
	pace   float64
	sample struct {
		at    time.Time
		nodes []string
	}
}

// informerGroups watches the group Leases with an informer of their own,
// under the informers' context, so that it stops and starts alone.
type informerGroups struct {
	a      *Agent
	parent context.Context
	cancel context.CancelFunc
}

// groupInformer is the informer of the lock and queue Leases (label
// kustodian.io/policy) of the agent's namespace.
func (a *Agent) groupInformer() (informers.SharedInformerFactory, cache.SharedIndexInformer) {
	f := informers.NewSharedInformerFactoryWithOptions(a.kube, 0, informers.WithNamespace(a.cfg.Namespace),
		tweaked(func(o *metav1.ListOptions) { o.LabelSelector = lock.LabelPolicy }))
	return f, f.Coordination().V1().Leases().Informer()
}

func (w *informerGroups) watch(ctx context.Context) (cache.Store, error) {
	a := w.a
	f, inf := a.groupInformer()
	if err := inf.SetTransform(stripManagedFields); err != nil {
		return nil, err
	}
	if _, err := inf.AddEventHandler(a.handlers().groupLeases); err != nil {
		return nil, err
	}
	if err := inf.SetWatchErrorHandlerWithContext(a.watchError); err != nil {
		return nil, err
	}
	gctx, cancel := context.WithCancel(w.parent)
	f.Start(gctx.Done())
	// Its heartbeat waits meanwhile: at most one.
	within := min(30*time.Second, a.cfg.Queue.Heartbeat)
	wait, done := context.WithTimeout(ctx, within)
	defer done()
	if !cache.WaitForCacheSync(wait.Done(), inf.HasSynced) {
		cancel()
		return nil, fmt.Errorf("watching the lock and queue Leases again: not read within %s", within)
	}
	w.stop()
	w.cancel = cancel
	return inf.GetStore(), nil
}

func (w *informerGroups) stop() {
	if w.cancel != nil {
		w.cancel()
		w.cancel = nil
	}
}

// lookFarBack is a sleeping agent's look at its group's Leases, when it is
// due: one LIST (from the API server's watch cache), told to the agent as
// its watch would have told it.
func (a *Agent) lookFarBack(ctx context.Context) error {
	f := &a.queue.far
	if !f.asleep || a.now().Before(f.listAt) {
		return nil
	}
	list, err := a.kube.CoordinationV1().Leases(a.cfg.Namespace).List(ctx,
		metav1.ListOptions{LabelSelector: lock.LabelPolicy, ResourceVersion: "0"})
	if err != nil {
		return fmt.Errorf("reading the lock and queue Leases: %w", err)
	}
	old := map[string]*coordv1.Lease{}
	for _, o := range f.store.List() {
		if l, ok := o.(*coordv1.Lease); ok {
			old[l.Name] = l
		}
	}
	items := make([]any, 0, len(list.Items))
	group, ttl := a.decision.Group, a.cfg.Lock.TTL
	held, unchanged := 0, false
	rvs := map[string]string{}
	for i := range list.Items {
		l := &list.Items[i]
		l.ManagedFields = nil
		items = append(items, l)
		if o, ok := old[l.Name]; !ok || o.ResourceVersion != l.ResourceVersion {
			a.sawQueue(nil, l)
		}
		delete(old, l.Name)
		switch {
		case lock.IsQueueName(l.Name):
			rvs[l.Name] = l.ResourceVersion
			if l.Name == group.QueueName() && f.lastRV[l.Name] == l.ResourceVersion {
				unchanged = true
			}
		case lock.IsLockName(l.Name):
			// A lock with a TTL that runs out before the next look may
			// be taken over then: free, as far as looking again goes.
			k := lock.LockOf(l)
			expires := ttl > 0 && !k.Renewed.IsZero() && k.Renewed.Add(ttl).Before(a.now().Add(decide.SleepMax*a.cfg.Queue.Heartbeat))
			if k.Grouped && k.Group == group && k.Holder != "" && !expires {
				held++
			}
		}
	}
	for _, l := range old {
		// Gone by the LIST's version: no later than that, and so after
		// any own write of it this agent made before the LIST.
		gone := l.DeepCopy()
		gone.ResourceVersion = list.ResourceVersion
		a.sawDeleted(gone)
		a.sawQueueDeleted(gone)
	}
	if err := f.store.get().Replace(items, list.ResourceVersion); err != nil {
		return err
	}
	f.lastRV, f.looked = rvs, true
	f.soon = held < max(len(a.decision.Locks), 1)
	f.listAt = a.now() // due: sleepOrWatch sets the next
	if unchanged && f.soon {
		// A lock is free and the queue has not moved since the last
		// look: watch, and pass its head if it is gone.
		f.awakeUntil = a.now().Add(a.cfg.Queue.StaleAfter() + 2*a.cfg.Queue.Heartbeat)
		a.log.Info("far back in the queue, a lock is free and the queue has not moved since the last look; watching it again")
	}
	return nil
}

// wakeToTakeOver: a node asleep whose decision is to pass a gone head
// watches first (its store is as old as its last look, and holds none of
// the writes since) and decides again; it stays awake until the takeover
// is through.
func (a *Agent) wakeToTakeOver(ctx context.Context, d decide.Decision) bool {
	f := &a.queue.far
	if !f.asleep || !d.Takeover || f.watcher == nil {
		return false
	}
	f.awakeUntil = a.now().Add(a.cfg.Queue.StaleAfter() + 2*a.cfg.Queue.Heartbeat)
	f.retryAt = time.Time{}
	a.sleepOrWatch(ctx, d)
	a.poke()
	return true
}

// sleepOrWatch follows decision d: a node far back in a fast queue stops
// watching its group's Leases until its next look; one near, or in a
// slower queue, watches them.
func (a *Agent) sleepOrWatch(ctx context.Context, d decide.Decision) {
	f := &a.queue.far
	if f.watcher == nil {
		return
	}
	now := a.now()
	a.measurePace(d, now)
	after, sleep := decide.Asleep(a.cfg.Queue.Heartbeat, a.queue.nearBand, d, f.pace)
	sleep = sleep && !now.Before(f.awakeUntil)
	switch {
	case sleep && !f.asleep:
		polled := cache.NewStore(cache.MetaNamespaceKeyFunc)
		if err := polled.Replace(f.store.List(), ""); err != nil {
			return
		}
		f.watcher.stop()
		f.store.set(polled)
		f.asleep, f.lastRV = true, nil
		a.log.Debug("far back in a fast queue: not watching its Leases", "ahead", d.Ahead, "places_per_second", f.pace, "next_look", after)
	case !sleep && f.asleep:
		if now.Before(f.retryAt) {
			break // asleep still: it looks meanwhile
		}
		st, err := f.watcher.watch(ctx)
		if err != nil {
			a.log.Warn("could not watch the lock and queue Leases again; trying again in a heartbeat, looking meanwhile", "err", err)
			f.retryAt = now.Add(a.cfg.Queue.Heartbeat)
			break
		}
		f.store.set(st)
		f.asleep = false
		a.log.Debug("watching its queue's Leases again", "ahead", d.Ahead)
		a.poke()
	}
	switch {
	case !f.asleep:
		f.listAt = time.Time{}
	case f.listAt.IsZero() || !now.Before(f.listAt):
		// Fallen asleep, or just looked: the next look. (Steps between
		// two looks, a heartbeat's, see nothing new.)
		if f.soon {
			after = 2*a.cfg.Queue.Heartbeat + a.cfg.Queue.Heartbeat/2
		}
		f.listAt = now.Add(after)
	}
}

// measurePace samples, at most once a heartbeat, how far the group's
// queue moved since the last sample: while watching, or asleep just after
// a look (otherwise the store is as old as that look).
func (a *Agent) measurePace(d decide.Decision, now time.Time) {
	f := &a.queue.far
	if f.asleep && !f.looked {
		return
	}
	f.looked = false
	l := a.locks.view.Get(d.Group.QueueName())
	if l == nil || d.State != lock.Waiting {
		f.pace, f.sample.at, f.sample.nodes = 0, time.Time{}, nil
		return
	}
	a.queue.mu.Lock()
	s, err := a.queue.summaryOf(l)
	a.queue.mu.Unlock()
	if err != nil {
		return
	}
	if f.sample.at.IsZero() {
		f.sample.at, f.sample.nodes = now, s.Nodes
		return
	}
	dt := now.Sub(f.sample.at)
	if dt < a.cfg.Queue.Heartbeat {
		return
	}
	// A rise counts at once, a fall by halves: a pace too low would let
	// a node sleep through its turn, one too high only wakes it early.
	if moved := decide.Moved(f.sample.nodes, s.Nodes); moved >= 0 {
		f.pace = max(float64(moved)/dt.Seconds(), f.pace/2)
	} // else not a measure: the pace stays
	f.sample.at, f.sample.nodes = now, s.Nodes
}
