package agent

import (
	"context"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/gates"
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

// holderFacts tells whether a lock's holder still counts: its record and
// whether its Node exists, read from the API at most once a heartbeat per
// holder (the Node only when the record is not live). Only an agent that may
// take a lock over asks, and only near the head of its queue.
func (a *Agent) holderFacts(ctx context.Context, holder string) (lock.HolderFacts, error) {
	if holder == "" {
		return lock.HolderFacts{}, nil
	}
	now := a.now()
	if c, ok := a.locks.holders[holder]; ok && now.Sub(c.at) < a.cfg.Queue.Heartbeat {
		return c.facts, nil
	}
	var f lock.HolderFacts
	r, err := a.records.get(ctx, holder)
	if err != nil {
		return f, fmt.Errorf("reading the record of %s, holder of the lock: %w", holder, err)
	}
	f.Record = r
	if r != nil && r.Live(now, a.cfg.Queue.StaleAfter()) {
		f.NodeExists = true // does not matter: a live holder keeps its lock
	} else {
		_, err := a.kube.CoreV1().Nodes().Get(ctx, holder, metav1.GetOptions{})
		switch {
		case err == nil:
			f.NodeExists = true
		case apierrors.IsNotFound(err):
			f.NodeExists = false
		default:
			return f, fmt.Errorf("reading node %s, holder of the lock: %w", holder, err)
		}
	}
	a.locks.holders[holder] = holderCheck{facts: f, at: now}
	return f, nil
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

type holderCheck struct {
	facts lock.HolderFacts
	at    time.Time
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
	s := decide.Snapshot{
		Now:           now,
		Node:          a.node,
		Request:       f.Request,
		InProgress:    f.InProgress,
		RebootPending: f.RebootPending,
		Self:          nodeFacts(node),
		Locks:         map[string]lock.Lock{},
		Queues:        map[string]decide.QueueState{},
		Holders:       map[string]lock.HolderFacts{},
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
			RequestFile:      a.cfg.RequestFile,
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
	for _, l := range a.locks.view.List() {
		switch {
		case lock.IsLockName(l.Name):
			s.Locks[l.Name] = lock.LockOf(l)
		case lock.IsQueueName(l.Name):
			q := decide.QueueState{Seen: a.queue.seen[l.Name]}
			q.Summary, q.Err = lock.SummaryFromLease(l)
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

// decide takes a snapshot, looks up what the decision needs, and decides.
func (a *Agent) decide(ctx context.Context) (decide.Decision, view, error) {
	s, err := a.snapshot()
	if err != nil {
		return decide.Decision{}, s, err
	}
	d := decide.Next(s.Snapshot)
	for range 3 {
		if d.Need.Empty() {
			break
		}
		for _, h := range d.Need.Holders {
			f, err := a.holderFacts(ctx, h)
			if err != nil {
				return d, s, err
			}
			s.Holders[h] = f
		}
		if d.Need.Command {
			a.gates.command = a.runGateCommand(ctx)
			a.gates.command.At = a.now()
			s.Command = a.gates.command
		}
		if d.Need.Cluster {
			a.gates.cluster = a.readCluster(ctx, s.Snapshot, d)
			s.Cluster = a.gates.cluster
		}
		if d.Need.Queue {
			// Where this node stands, from one LIST of the records: once
			// when it joins the queue, not again while it waits.
			mine, err := a.locks.summarize(ctx, d.Group)
			if err != nil {
				return d, s, err
			}
			a.queue.mine, a.queue.mineGroup = &mine, d.Group
			s.Mine, s.Listed = a.queue.mine, true
		}
		if d.Need.Kured {
			ok, why, err := a.holdKured(ctx)
			if err != nil {
				return d, s, err
			}
			refused := ""
			if !ok {
				refused = why
			}
			s.DrainLookups.KuredRefused = &refused
		}
		if d.Need.Quarantine {
			full, err := a.quarantineFull(ctx, d.Policy)
			if err != nil {
				return d, s, err
			}
			s.DrainLookups.QuarantineFull = &full
		}
		if d.Need.Overbooking {
			over, why, err := a.overbooked(ctx, d.Policy, s.Observed().HeldLocks)
			if err != nil {
				return d, s, err
			}
			if !over {
				why = ""
			}
			s.DrainLookups.Overbooked = &why
		}
		// The look-ups took time (a gate command may take seconds).
		s.Now = a.now()
		d = decide.Next(s.Snapshot)
	}
	if d.Unlisted {
		a.log.Info("the queue does not list this node's record as this agent last wrote it; writing it again", "group", d.Group.String())
	}
	if !d.Need.Empty() {
		return d, s, fmt.Errorf("the decision still needs %+v after looking it up", d.Need)
	}
	a.decision = d
	return d, s, nil
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

// runGateCommand runs gates.command.
func (a *Agent) runGateCommand(ctx context.Context) *decide.CommandResult {
	r := gates.Command(ctx, a.cfg.Gates.Command, a.cfg.CommandDeadline())
	if !r.OK {
		a.log.Info("gate command blocks", "reason", r.Reason)
	}
	return &r
}

// readCluster reads what the cluster-wide gates of the node's policy need.
// What cannot be read closes its gate with the reason; the agent goes on
// beating meanwhile.
func (a *Agent) readCluster(ctx context.Context, s decide.Snapshot, d decide.Decision) *decide.ClusterFacts {
	spec := d.Policy.Spec
	c := &decide.ClusterFacts{For: decide.ClusterKey(d), At: a.now()}
	var err error
	if spec.Health.MaxUnavailable != nil {
		if c.Nodes, err = gates.Nodes(ctx, a.kube, false, s.Policies); err != nil {
			c.NodesErr = err.Error()
		}
	}
	if spec.Health.WorkloadsRecovered {
		if c.Workloads, err = gates.Workloads(ctx, a.kube, decide.Disrupted(s, d)); err != nil {
			c.WorkloadsErr = err.Error()
		}
	}
	if p := spec.Blockers.Prometheus; p != nil {
		if auth, err := remoteAuth(a.cfg.Prometheus.Endpoints, "prometheus.endpoints", p.URL); err != nil {
			c.Prometheus = &decide.PrometheusResult{Err: "spec.blockers.prometheus.url: " + err.Error()}
		} else {
			c.Prometheus = gates.Prometheus(ctx, a.gates.http, auth, p)
		}
	}
	if b := spec.Blockers.Alertmanager; b != nil && spec.Alertmanager != nil {
		if client, err := a.alertmanagerClient(spec.Alertmanager); err != nil {
			c.Alertmanager = &decide.PrometheusResult{Err: err.Error()}
		} else {
			c.Alertmanager = gates.Alertmanager(ctx, client, b)
		}
	}
	return c
}

// jitterOf is a node's share of the spread (decide.Params.Jitter): the same
// for the node at every start, different between nodes.
func jitterOf(node string) float64 {
	h := fnv.New64a()
	h.Write([]byte(node))
	return float64(h.Sum64()%1000) / 1000
}
