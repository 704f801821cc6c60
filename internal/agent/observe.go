package agent

import (
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/internal/kured/kuredapi"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/policy"
)

func (a *Agent) cachedNode() *corev1.Node {
	obj, ok, err := a.caches.nodes.GetByKey(a.node)
	if err != nil || !ok {
		return nil
	}
	n, _ := obj.(*corev1.Node)
	return n
}

// paused reads the control ConfigMap.
func (a *Agent) paused() (bool, string) {
	obj, ok, err := a.caches.control.GetByKey(a.cfg.Namespace + "/" + lock.ControlConfigMap)
	if err != nil || !ok {
		return false, ""
	}
	cm, _ := obj.(*corev1.ConfigMap)
	return lock.Paused(cm)
}

func (a *Agent) myRecordLease() *coordv1.Lease { return a.records.mine() }

func (a *Agent) myRecord() *lock.Record {
	l := a.myRecordLease()
	if l == nil {
		return nil
	}
	r := lock.RecordFromLease(l)
	return &r
}

// view is a snapshot with the Node it was read from, which the agent acts
// on (cordons, labels, Events), and the drain it read (Snapshot.Drain).
type view struct {
	decide.Snapshot
	node *corev1.Node
	run  *drainRun
}

// snapshot gathers what a decision depends on from the host files and the
// informers' caches (overlaid with the agent's own writes), read into the
// plain values decide works on. It is the one seam between how the agent
// watches the cluster and what it decides.
func (a *Agent) snapshot() (view, error) {
	f, err := a.files.Observe()
	if err != nil {
		return view{}, permanent(err)
	}
	node := a.cachedNode()
	now := a.now()
	if l := a.myRecordLease(); l != nil {
		if err := lock.CheckFormat(l); err != nil {
			// A newer agent ran on this host: this one would write its
			// record over in the older format.
			return view{}, permanent(fmt.Errorf("this node's own record (a newer agent ran on this host: install it again, or delete Lease %s/%s to start over): %w", l.Namespace, l.Name, err))
		}
	}
	rec := a.myRecord()
	requestFile, cr := a.cfg.RequestFile, a.clusterRequest(rec)
	if w := a.reported.request.wakeAt; !w.IsZero() && !now.Before(w) {
		a.reported.request.wakeAt = time.Time{} // this step is the one it woke
	}
	req := requestOf(f.Request, cr, rec)
	if cr != nil && req != nil && req.ID == cr.ID() {
		// What the messages tell to remove.
		requestFile = "maintenancerequest/" + cr.Name + " (kustodian-ctl done " + a.node + ")"
	}
	s := decide.Snapshot{
		Now:           now,
		Node:          a.node,
		Request:       req,
		InProgress:    f.InProgress,
		RebootPending: f.RebootPending,
		Self:          nodeFacts(node),
		Locks:         map[string]lock.Lock{},
		Queues:        map[string]decide.QueueState{},
		Holders:       map[string]lock.HolderFacts{},
		Unreadable:    map[string]string{},
		Watching:      a.queue.watching,
		HasCommand:    a.cfg.Gates.Command != "",
		FailedRequest: a.failed.request,
		FailedWhy:     a.failed.why,
		Params: decide.Params{
			StaleAfter: a.cfg.Queue.StaleAfter(),
			Heartbeat:  a.cfg.Queue.Heartbeat,
			TTL:        a.cfg.Lock.TTL,
			Owner:      a.owner,
			Poll:       a.cfg.Gates.Poll,
			Jitter:     a.queue.jitter,

			ReleaseOnTimeout: a.cfg.Drain.OnTimeout == config.OnTimeoutRelease,
			RequestFile:      requestFile,
		},
	}
	a.drain.mu.Lock()
	run := a.drain.run
	a.drain.mu.Unlock()
	if run != nil {
		s.Drain = a.drainState(run)
	}
	s.Own = a.myRecord()
	a.queue.mu.Lock()
	if u := a.queue.unreadable; u != nil && u.group == a.decision.Group {
		s.Unreadable[u.lease] = u.why // a record of the queue it is in, not of one it left
	}
	for _, l := range a.locks.view.List() {
		if err := lock.CheckFormat(l); err != nil {
			s.Unreadable[l.Name] = err.Error()
		}
		switch {
		case lock.IsLockName(l.Name):
			s.Locks[l.Name] = lock.LockOf(l)
		case lock.IsQueueName(l.Name):
			q := decide.QueueState{Seen: a.queue.seen[l.Name], Changed: a.queue.changed[l.Name]}
			q.Summary, q.Err = a.queue.summaryOf(l)
			s.Queues[l.Name] = q
		}
	}
	a.queue.mu.Unlock()
	if a.queue.mine != nil && a.queue.mineGroup == a.decision.Group {
		s.Mine = a.queue.mine
	}
	s.Paused, s.PausedReason = a.paused()
	if l, ok := a.kuredLock(); ok {
		s.Kured = &l
	}
	s.Policies = a.policies()
	var nodeLabels map[string]string
	if node != nil {
		nodeLabels = node.Labels
	}
	resolved := a.resolvePolicy(s.Policies, nodeLabels)
	s.Policy = resolved
	if a.caches.pods != nil {
		for _, obj := range a.caches.pods.List() {
			if p, ok := obj.(*corev1.Pod); ok {
				s.Pods = append(s.Pods, decide.PodFacts{Namespace: p.Namespace, Name: p.Name, NodeName: p.Spec.NodeName, Labels: p.Labels,
					Ended: p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed})
			}
		}
	}
	// The last results, however old: decide says when they are stale.
	s.Cluster, s.Command = a.gates.cluster, a.gates.command
	return view{Snapshot: s, node: node, run: run}, nil
}

// nodeFacts is what decide reads of a Node; nil for none.
func nodeFacts(n *corev1.Node) *decide.NodeFacts {
	if n == nil {
		return nil
	}
	f := &decide.NodeFacts{Labels: n.Labels}
	f.HoldReason, f.Held = n.Annotations[lock.AnnotationHold]
	f.CordonedByUs = lock.CordonMarked(n.Annotations)
	f.Quarantined = quarantinedNode(n)
	f.Cordoned = n.Spec.Unschedulable
	return f
}

// policies are the MaintenancePolicies of the namespace, from the cache.
func (a *Agent) policies() []*policy.MaintenancePolicy {
	if a.caches.policies == nil {
		return nil
	}
	var objs []*unstructured.Unstructured
	for _, obj := range a.caches.policies.List() {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			objs = append(objs, u)
		}
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].GetName() < objs[j].GetName() })
	var key strings.Builder
	for _, u := range objs {
		fmt.Fprintf(&key, "%s@%s,", u.GetName(), u.GetResourceVersion())
	}
	if a.caches.policyCache.read && key.String() == a.caches.policyCache.key {
		return a.caches.policyCache.policies
	}
	var out []*policy.MaintenancePolicy
	for _, u := range objs {
		p, err := policy.FromUnstructured(u)
		if err != nil {
			// Kept, so that it holds the nodes instead of letting them go
			// unruled.
			p = policy.Unreadable(u.GetName(), err)
			a.log.Warn("MaintenancePolicy cannot be read", "policy", u.GetName(), "err", err)
		}
		out = append(out, p)
	}
	a.caches.policyCache = policyCache{read: true, key: key.String(), policies: out}
	return out
}

// policyCache keeps the policies as last read, and the resolution of this
// node's policy among them, until a policy or the Node's labels change:
// policies are read, validated and their windows parsed once per change,
// not at every step.
type policyCache struct {
	read     bool
	key      string // the policies' names and resource versions
	policies []*policy.MaintenancePolicy
	// resolvedFor is the Node's labels resolved is for ("" before the
	// first resolution).
	resolvedFor string
	resolved    policy.Effective
}

// resolvePolicy is this node's policy among policies (those policies()
// just returned), resolved again only when they or its labels changed.
func (a *Agent) resolvePolicy(policies []*policy.MaintenancePolicy, nodeLabels map[string]string) policy.Effective {
	keys := make([]string, 0, len(nodeLabels))
	for k, v := range nodeLabels {
		keys = append(keys, k+"="+v)
	}
	sort.Strings(keys)
	forKey := a.caches.policyCache.key + "|" + strings.Join(keys, ",")
	if forKey != a.caches.policyCache.resolvedFor {
		a.caches.policyCache.resolved = policy.Resolve(policies, nodeLabels)
		a.caches.policyCache.resolvedFor = forKey
	}
	return a.caches.policyCache.resolved
}

// jitterOf is a node's share of the spread (decide.Params.Jitter): the same
// for the node at every start, different between nodes.
func jitterOf(node string) float64 {
	h := fnv.New64a()
	h.Write([]byte(node))
	return float64(h.Sum64()%1000) / 1000
}

// kuredLock reads Kured's lock from the cache; ok is false when Kured's
// DaemonSet is absent or kured.enabled is false.
func (a *Agent) kuredLock() (kured.Locks, bool) {
	if a.caches.kured == nil {
		return kured.Locks{}, false
	}
	obj, exists, err := a.caches.kured.GetByKey(a.kured.ds.String())
	if err != nil || !exists {
		return kured.Locks{}, false
	}
	ds, _ := obj.(*appsv1.DaemonSet)
	if ds == nil {
		return kured.Locks{}, false
	}
	l, err := kuredapi.Locks(ds, a.kured.keys)
	if err != nil {
		a.log.Warn("Kured's lock is unreadable; treating it as held", "err", err)
	}
	return l, true
}
