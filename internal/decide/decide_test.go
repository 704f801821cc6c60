package decide

import (
	"fmt"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kustodian/kustodian/internal/hostfiles"
	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/policy"
)

// t0 is a Monday, 12:00 UTC.
var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// node is what the agent reads of a Node with these labels.
func node(labels map[string]string) *NodeFacts {
	return &NodeFacts{Labels: labels}
}

// waiter is a live Waiting record that arrived at queue key key.
func waiter(name string, g lock.GroupRef, key string) lock.Record {
	return lock.Record{Node: name, State: lock.Waiting, Policy: g.Policy, Group: g.Group, QueueKey: key,
		Heartbeat: t0, Since: t0.Add(-time.Minute), Requested: t0.Add(-time.Minute)}
}

// held is a lock of no group that holder holds ("": free), as the agent
// reads it from its Lease.
func held(name, holder string) lock.Lock {
	return lock.LockOf(&coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: coordv1.LeaseSpec{HolderIdentity: &holder}})
}

// heldIn is a lock of group g that holder holds, read from its Lease.
func heldIn(name, holder string, g lock.GroupRef) lock.Lock {
	l := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{lock.LabelPolicy: g.Policy}}, Spec: coordv1.LeaseSpec{HolderIdentity: &holder}}
	if g.Group != "" {
		l.Annotations = map[string]string{lock.AnnotationGroup: g.Group}
	}
	return lock.LockOf(l)
}

// snap is node "me", requesting, the head of its group's queue (the only
// node its summary names), every lock free.
func snap(mod ...func(*Snapshot)) Snapshot {
	s := Snapshot{
		Now:      t0,
		Node:     "me",
		Request:  &hostfiles.Request{ID: "r1"},
		Self:     node(map[string]string{"zone": "a", "role": "worker"}),
		Locks:    map[string]lock.Lock{},
		Holders:  map[string]lock.HolderFacts{},
		Watching: t0.Add(-time.Hour),
		Params:   Params{StaleAfter: 40 * time.Second, Heartbeat: 10 * time.Second, Poll: 5 * time.Second},
	}
	own := waiter("me", lock.DefaultGroup, "10")
	s.Own = &own
	s.Queues = map[string]QueueState{anyGroup: {Summary: summary("me"), Seen: t0}}
	for _, m := range mod {
		m(&s)
	}
	// The records and summaries of "any group" are the node's own group's.
	var labels map[string]string
	if s.Self != nil {
		labels = s.Self.Labels
	}
	e := policy.Resolve(s.Policies, labels)
	g := lock.GroupRef{Policy: e.Name, Group: e.Group}
	if s.Own != nil && s.Own.Policy == lock.DefaultGroup.Policy {
		s.Own.Policy, s.Own.Group = g.Policy, g.Group
	}
	if q, ok := s.Queues[anyGroup]; ok {
		delete(s.Queues, anyGroup)
		s.Queues[g.QueueName()] = q
	}
	return s
}

// anyGroup stands for the node's group in Snapshot.Queues until snap knows
// which it is.
const anyGroup = "*"

// summary names nodes, all there were, as of resource version 100.
func summary(nodes ...string) lock.Summary {
	s := lock.Summary{Nodes: nodes, Total: len(nodes), ListRV: "100"}
	if len(nodes) > 0 {
		s.Last = &lock.Place{Key: "99"}
	}
	return s
}

// queued replaces the node's group's summary.
func queued(sum lock.Summary, seen time.Time) func(*Snapshot) {
	return func(s *Snapshot) { s.Queues = map[string]QueueState{anyGroup: {Summary: sum, Seen: seen}} }
}

func withPolicy(mod func(*policy.Spec)) func(*Snapshot) {
	return func(s *Snapshot) {
		p := &policy.MaintenancePolicy{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
		mod(&p.Spec)
		s.Policies = append(s.Policies, p)
	}
}

// withCluster sets the cluster facts as read for the decision's group and
// policy.
func keyed(s Snapshot) Snapshot {
	if s.Cluster != nil && s.Cluster.For == "" {
		s.Cluster.For = ClusterKey(next(Snapshot{Now: s.Now, Node: s.Node, Self: s.Self, Policies: s.Policies, Locks: s.Locks}))
	}
	return s
}

func TestWaitingGates(t *testing.T) {
	berlin := "Europe/Berlin"
	for _, tc := range []struct {
		name    string
		s       Snapshot
		try     bool   // a lock to try
		gate    string // the gate that holds it
		blocked bool   // Blocked: the node behind may pass
		msg     string
		need    Need
	}{
		{name: "all open: try the lock", s: snap(), try: true, msg: "waiting: position 1 of 1"},
		{name: "paused", s: snap(func(s *Snapshot) { s.Paused, s.PausedReason = true, "incident 42" }), gate: GatePaused, msg: "waiting: maintenance is paused: incident 42"},
		{name: "a Lease in a newer format", s: snap(func(s *Snapshot) { s.Unreadable = map[string]string{"node-b": "Lease kustodian/node-b is in format 2"} }),
			gate: GateFormat, blocked: true, msg: "waiting: Lease kustodian/node-b is in format 2"},
		{name: "a lock of another group in a newer format: no matter", s: snap(func(s *Snapshot) {
			s.Unreadable = map[string]string{"lock-other-0": "Lease kustodian/lock-other-0 is in format 2", "queue-other": "..."}
		}), try: true},
		{name: "its lock in a newer format", s: snap(func(s *Snapshot) {
			s.Unreadable = map[string]string{"lock-default-0": "Lease kustodian/lock-default-0 is in format 2"}
		}), gate: GateFormat, blocked: true, msg: "lock-default-0 is in format 2"},
		{name: "a newer format and paused: the format is this node's own", s: snap(func(s *Snapshot) {
			s.Unreadable, s.Paused = map[string]string{"lock-default-0": "Lease kustodian/lock-default-0 is in format 2"}, true
		}), gate: GatePaused, msg: "waiting: maintenance is paused"},
		{name: "no Node object", s: snap(func(s *Snapshot) { s.Self = nil }), gate: GateNode, blocked: true, msg: "Node object does not exist"},
		{name: "held by an admin", s: snap(func(s *Snapshot) { s.Self.Held, s.Self.HoldReason = true, "disk swap" }), gate: GateHold, blocked: true, msg: "held by an admin: disk swap (kustodian-ctl resume me)"},
		{name: "policy tie", s: snap(withPolicy(func(*policy.Spec) {}), func(s *Snapshot) {
			s.Policies = append(s.Policies, &policy.MaintenancePolicy{ObjectMeta: metav1.ObjectMeta{Name: "q"}})
		}), gate: GatePolicy, blocked: true, msg: "both select this node"},
		{name: "Kured's lock held by a rebooting node", s: snap(func(s *Snapshot) {
			s.Kured = kuredKeys(kured.Lock{Holders: []kured.Holder{{NodeID: "n9", Created: t0}}})
		}), gate: GateKured, msg: "Kured's lock is held by n9"},
		{name: "Kured's lock held by a Kustodian node in maintenance", s: snap(func(s *Snapshot) {
			s.Kured = kuredKeys(kured.Lock{Holders: []kured.Holder{{NodeID: "kustodian:n9", Created: t0}}})
		}), gate: GateKured, msg: "kustodian:n9"},
		// Counted as Kured's own Acquire counts it: otherwise the node would
		// take its lock only to give it back, again and again.
		{name: "Kured's lock left by a Kustodian node that is done", s: snap(func(s *Snapshot) {
			s.Kured = kuredKeys(kured.Lock{Holders: []kured.Holder{{NodeID: "kustodian:n9", Created: t0}}})
		}), gate: GateKured, msg: "kustodian:n9"},
		{name: "Kured's lock free under one key, held under the other", s: snap(func(s *Snapshot) {
			s.Kured = kuredKeys(kured.Lock{}, kured.Lock{Holders: []kured.Holder{{NodeID: "n8", Created: t0}}})
		}), gate: GateKured, msg: "Kured's lock is held by n8"},
		{name: "Kured's lock with room left", s: snap(func(s *Snapshot) {
			s.Kured = kuredKeys(kured.Lock{MaxOwners: 2, Holders: []kured.Holder{{NodeID: "n9", Created: t0}}})
		}), try: true},
		{name: "outside the window", s: snap(withPolicy(func(p *policy.Spec) {
			p.Windows = []policy.Window{{Days: []string{"Sat"}, Start: "02:00", End: "06:00", TimeZone: berlin}}
		})), gate: GateWindow, msg: "waiting: outside window: next opens Sat 02:00 Europe/Berlin"},
		{name: "inside the window", s: snap(withPolicy(func(p *policy.Spec) {
			p.Windows = []policy.Window{{Start: "11:00", End: "13:00"}}
		})), try: true},
		{name: "an excluded date", s: snap(withPolicy(func(p *policy.Spec) {
			p.Windows = []policy.Window{{Start: "11:00", End: "13:00"}}
			p.ExcludeDates = []string{"2026-11-23"}
		})), gate: GateWindow, msg: "next opens Tue 11:00 UTC"},
		{name: "a blocking pod", s: snap(withPolicy(func(p *policy.Spec) {
			p.Blockers.PodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kustodian.io/block": "true"}}
		}), func(s *Snapshot) {
			s.Pods = []PodFacts{pod("shop", "backup-1", "me", corev1.PodRunning, true), pod("shop", "web", "me", corev1.PodRunning, false),
				pod("shop", "done", "me", corev1.PodSucceeded, true)}
		}), gate: GatePods, blocked: true, msg: "waiting: blocked by pod shop/backup-1"},
		{name: "a finished blocking pod does not block", s: snap(withPolicy(func(p *policy.Spec) {
			p.Blockers.PodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kustodian.io/block": "true"}}
		}), func(s *Snapshot) { s.Pods = []PodFacts{pod("shop", "done", "me", corev1.PodFailed, true)} }), try: true},
		{name: "gate command not yet run", s: snap(func(s *Snapshot) { s.HasCommand = true }), need: Need{Command: true}},
		{name: "gate command fails", s: snap(func(s *Snapshot) { s.HasCommand, s.Command = true, &CommandResult{Reason: "ceph is degraded"} }),
			gate: GateCommand, blocked: true, msg: "waiting: gate command: ceph is degraded"},
		{name: "gate command passes", s: snap(func(s *Snapshot) { s.HasCommand, s.Command = true, &CommandResult{OK: true} }), try: true},
		{name: "gate command passed, less than a poll ago", s: snap(func(s *Snapshot) {
			s.HasCommand, s.Command = true, &CommandResult{OK: true, At: t0.Add(-4 * time.Second)}
		}), try: true},
		{name: "gate command passed a poll ago: run again", s: snap(func(s *Snapshot) {
			s.HasCommand, s.Command = true, &CommandResult{OK: true, At: t0.Add(-5 * time.Second)}
		}), need: Need{Command: true}},
		{name: "spacing", s: snap(withPolicy(func(p *policy.Spec) { p.Spacing = &metav1.Duration{Duration: 5 * time.Minute} }), func(s *Snapshot) {
			s.Locks["lock-p-0"] = released("lock-p-0", t0.Add(-2*time.Minute))
		}), gate: GateSpacing, msg: "the next may start at 12:03:00 UTC"},
		{name: "spacing over", s: snap(withPolicy(func(p *policy.Spec) { p.Spacing = &metav1.Duration{Duration: 5 * time.Minute} }), func(s *Snapshot) {
			s.Locks["lock-p-0"] = released("lock-p-0", t0.Add(-6*time.Minute))
		}), try: true},
		{name: "spacing from a clock 30 s ahead", s: snap(withPolicy(func(p *policy.Spec) { p.Spacing = &metav1.Duration{Duration: 5 * time.Minute} }), func(s *Snapshot) {
			s.Locks["lock-p-0"] = released("lock-p-0", t0.Add(30*time.Second))
		}), gate: GateSpacing, msg: "the next may start at 12:05:30 UTC"},
		{name: "spacing from a release stamped in 2999: not counted", s: snap(withPolicy(func(p *policy.Spec) { p.Spacing = &metav1.Duration{Duration: 5 * time.Minute} }), func(s *Snapshot) {
			s.Locks["lock-p-0"] = released("lock-p-0", time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC))
		}), try: true},
		{name: "cluster gates read for another version of the policy: read again", s: snap(withPolicy(func(p *policy.Spec) { p.Health.MaxUnavailable = ptr(intstr.FromInt32(1)) }), func(s *Snapshot) {
			s.Cluster = &ClusterFacts{For: "p|<nil>|false|<nil>"}
		}), need: Need{Cluster: true}},
		{name: "cluster gates: read first", s: snap(withPolicy(func(p *policy.Spec) { p.Health.MaxUnavailable = ptr(intstr.FromInt32(1)) })), need: Need{Cluster: true}},
		{name: "maxUnavailable: another node NotReady", s: snap(withPolicy(func(p *policy.Spec) { p.Health.MaxUnavailable = ptr(intstr.FromInt32(1)) }), func(s *Snapshot) {
			s.Cluster = &ClusterFacts{Nodes: []lock.NodeHealth{{Name: "me", Policy: "p", Ready: true}, {Name: "n7", Policy: "p"}, {Name: "n8", Policy: "p", Ready: true}}}
		}), gate: GateMaxUnavailable, msg: "waiting: 2 of 1 allowed nodes unavailable: n7 NotReady"},
		{name: "maxUnavailable: another node cordoned", s: snap(withPolicy(func(p *policy.Spec) { p.Health.MaxUnavailable = ptr(intstr.FromInt32(1)) }), func(s *Snapshot) {
			s.Cluster = &ClusterFacts{Nodes: []lock.NodeHealth{{Name: "me", Policy: "p", Ready: true}, {Name: "n7", Policy: "p", Ready: true, Unschedulable: true}}}
		}), gate: GateMaxUnavailable, msg: "n7 cordoned"},
		{name: "maxUnavailable: nodes of other policies do not count", s: snap(withPolicy(func(p *policy.Spec) {
			p.Health.MaxUnavailable = ptr(intstr.FromInt32(1))
			p.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"role": "worker"}}
		}), func(s *Snapshot) {
			s.Cluster = &ClusterFacts{Nodes: []lock.NodeHealth{{Name: "me", Policy: "p", Ready: true}, {Name: "cp", Policy: "default"}}}
		}), try: true},
		{name: "maxUnavailable: a node holding a lock counts before it cordons", s: snap(withPolicy(func(p *policy.Spec) {
			p.Health.MaxUnavailable = ptr(intstr.FromInt32(1))
			p.GroupBy = "zone"
		}), func(s *Snapshot) {
			s.Cluster = &ClusterFacts{Nodes: []lock.NodeHealth{{Name: "me", Policy: "p", Ready: true}, {Name: "n7", Policy: "p", Ready: true}}}
			s.Locks["lock-p-b-0"] = heldIn("lock-p-b-0", "n7", lock.GroupRef{Policy: "p", Group: "b"})
		}), gate: GateMaxUnavailable, msg: "n7 in maintenance"},
		{name: "maxUnavailable: nodes cannot be read", s: snap(withPolicy(func(p *policy.Spec) { p.Health.MaxUnavailable = ptr(intstr.FromInt32(1)) }), func(s *Snapshot) {
			s.Cluster = &ClusterFacts{NodesErr: "forbidden"}
		}), gate: GateMaxUnavailable, msg: "cannot count the unavailable nodes: forbidden"},
		{name: "a lock name another group made", s: snap(withPolicy(func(p *policy.Spec) {}), func(s *Snapshot) {
			s.Locks["lock-p-0"] = heldIn("lock-p-0", "", lock.GroupRef{Policy: "p-0x"})
		}), gate: GatePolicy, msg: "lock lock-p-0 belongs to group p-0x, not p"},
		{name: "maxUnavailable: room left", s: snap(withPolicy(func(p *policy.Spec) { p.Health.MaxUnavailable = ptr(intstr.FromInt32(2)) }), func(s *Snapshot) {
			s.Cluster = &ClusterFacts{Nodes: []lock.NodeHealth{{Name: "me", Policy: "p", Ready: true}, {Name: "n7", Policy: "p"}}}
		}), try: true},
		{name: "maxUnavailable: room left a poll ago: read again", s: snap(withPolicy(func(p *policy.Spec) { p.Health.MaxUnavailable = ptr(intstr.FromInt32(2)) }), func(s *Snapshot) {
			s.Cluster = &ClusterFacts{Nodes: []lock.NodeHealth{{Name: "me", Policy: "p", Ready: true}, {Name: "n7", Policy: "p"}}, At: t0.Add(-5 * time.Second)}
		}), need: Need{Cluster: true}},
		{name: "workloads not recovered", s: snap(withPolicy(func(p *policy.Spec) { p.Health.WorkloadsRecovered = true }), func(s *Snapshot) {
			s.Cluster = &ClusterFacts{Workloads: []Workload{{Ref: "Deployment/shop/web", Available: 3, Desired: 4}, {Ref: "StatefulSet/shop/db", Gone: true}}}
		}), gate: GateWorkloads, msg: "waiting: waiting for Deployment/shop/web (3/4) to be available again"},
		{name: "workloads recovered", s: snap(withPolicy(func(p *policy.Spec) { p.Health.WorkloadsRecovered = true }), func(s *Snapshot) {
			s.Cluster = &ClusterFacts{Workloads: []Workload{{Ref: "Deployment/shop/web", Available: 4, Desired: 4}}}
		}), try: true},
		{name: "an alert firing", s: snap(withPolicy(func(p *policy.Spec) { p.Blockers.Prometheus = &policy.Prometheus{URL: "http://p"} }), func(s *Snapshot) {
			s.Cluster = &ClusterFacts{Prometheus: &PrometheusResult{Blocking: []string{"KubePodCrashLooping"}}}
		}), gate: GatePrometheus, msg: "waiting: alert KubePodCrashLooping firing"},
		{name: "Prometheus unreachable", s: snap(withPolicy(func(p *policy.Spec) { p.Blockers.Prometheus = &policy.Prometheus{URL: "http://p"} }), func(s *Snapshot) {
			s.Cluster = &ClusterFacts{Prometheus: &PrometheusResult{Err: "http://p/api/v1/alerts unreachable: connection refused"}}
		}), gate: GatePrometheus, msg: "Prometheus cannot be asked, so it blocks: http://p/api/v1/alerts unreachable"},
		{name: "Prometheus quiet", s: snap(withPolicy(func(p *policy.Spec) { p.Blockers.Prometheus = &policy.Prometheus{URL: "http://p"} }), func(s *Snapshot) {
			s.Cluster = &ClusterFacts{Prometheus: &PrometheusResult{}}
		}), try: true},
		{name: "gates combined: the first closed one speaks", s: snap(withPolicy(func(p *policy.Spec) {
			p.Windows = []policy.Window{{Days: []string{"Sat"}, Start: "02:00", End: "06:00"}}
			p.Blockers.PodSelector = &metav1.LabelSelector{}
		}), func(s *Snapshot) {
			s.Paused = true
			s.Pods = []PodFacts{pod("shop", "x", "me", corev1.PodRunning, false)}
		}), gate: GatePaused, msg: "maintenance is paused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := next(keyed(tc.s))
			if d.State != lock.Waiting {
				t.Fatalf("state %s", d.State)
			}
			if !equalNeed(d.Need, tc.need) {
				t.Fatalf("need %+v, want %+v", d.Need, tc.need)
			}
			if !tc.need.Empty() {
				return
			}
			if (len(d.Try) > 0) != tc.try || d.Gate != tc.gate || (d.Blocked != "") != tc.blocked || !strings.Contains(d.Message, tc.msg) {
				t.Errorf("got try=%v gate=%q blocked=%q message=%q\nwant try=%v gate=%q blocked=%v message~%q",
					d.Try, d.Gate, d.Blocked, d.Message, tc.try, tc.gate, tc.blocked, tc.msg)
			}
			if tc.gate != "" {
				found := false
				for _, g := range d.Gates {
					if g.Gate == tc.gate {
						found = g.Verdict == Closed && strings.HasPrefix(d.Message, "waiting: "+g.Reason)
					}
				}
				if !found {
					t.Errorf("gate %s not closed with the message's reason in %+v", tc.gate, d.Gates)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func equalNeed(a, b Need) bool {
	return a.Command == b.Command && a.Cluster == b.Cluster && strings.Join(a.Holders, ",") == strings.Join(b.Holders, ",")
}

func pod(ns, name, nodeName string, phase corev1.PodPhase, block bool) PodFacts {
	p := PodFacts{Namespace: ns, Name: name, NodeName: nodeName, Ended: phase == corev1.PodSucceeded || phase == corev1.PodFailed}
	if block {
		p.Labels = map[string]string{"kustodian.io/block": "true"}
	}
	return p
}

func TestWakeAndBlockedAfter(t *testing.T) {
	window := withPolicy(func(p *policy.Spec) {
		p.Windows = []policy.Window{{Start: "14:00", End: "15:00"}}
		p.Health.BlockedAfter = &metav1.Duration{Duration: 30 * time.Minute}
	})
	// No slot free: the head has no summary to renew.
	busy := func(s *Snapshot) {
		s.Locks["lock-p-0"] = held("lock-p-0", "busy")
		s.Params.Owner = &lock.NodeRef{Name: "me", UID: "u"}
	}
	d := next(snap(window, busy))
	if want := t0.Add(29 * time.Minute); !d.WakeAt.Equal(want) {
		t.Errorf("wake at %s, want when blockedAfter passes, %s", d.WakeAt, want)
	}
	if d := next(snap(withPolicy(func(p *policy.Spec) { p.Windows = []policy.Window{{Start: "14:00", End: "15:00"}} }), busy)); !d.WakeAt.Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("wake at %s, want the window's opening", d.WakeAt)
	}
	if d.ReportBlocked {
		t.Error("reported blocked after 1 minute")
	}
	late := snap(window, func(s *Snapshot) { s.Own.Since = t0.Add(-time.Hour) })
	d = next(late)
	if !d.ReportBlocked || !strings.HasSuffix(d.Message, "(blocked since 2026-11-23 11:00 UTC)") {
		t.Errorf("after an hour: report=%v message=%q", d.ReportBlocked, d.Message)
	}
	late.Own.BlockedReported = true
	if d := next(late); d.ReportBlocked {
		t.Error("reported twice")
	}
	// Not blocked by a gate, only waiting in line: nothing to report.
	inLine := snap(func(s *Snapshot) { s.Own.Since = t0.Add(-time.Hour) }, queued(summary("first", "me"), t0),
		withPolicy(func(p *policy.Spec) { p.Health.BlockedAfter = &metav1.Duration{Duration: time.Minute} }))
	if d := next(inLine); d.ReportBlocked || d.Gate != GateQueue {
		t.Errorf("in line: report=%v gate=%s", d.ReportBlocked, d.Gate)
	}
	// Cluster gates closed at the head: poll again.
	polling := snap(withPolicy(func(p *policy.Spec) { p.Health.MaxUnavailable = ptr(intstr.FromInt32(1)) }), func(s *Snapshot) {
		s.Cluster = &ClusterFacts{Nodes: []lock.NodeHealth{{Name: "n7", Policy: "p"}}}
	})
	if d := next(keyed(polling)); !d.WakeAt.Equal(t0.Add(5 * time.Second)) {
		t.Errorf("polling: wake at %s", d.WakeAt)
	}
}

func TestNotWaiting(t *testing.T) {
	s := snap(func(s *Snapshot) { s.Locks["lock-default-0"] = held("lock-default-0", "me") })
	if d := next(s); d.State != lock.Draining || len(d.Try) != 0 || d.Message != "" {
		t.Errorf("holding the lock: %+v", d)
	}
	// A lock of another group (an older policy) still counts as held.
	s = snap(func(s *Snapshot) { s.Locks["lock-old-0"] = held("lock-old-0", "me"); s.Request = nil })
	if d := next(s); d.State != lock.Completing {
		t.Errorf("a lock of an old group: state %s", d.State)
	}
}

// The policy the caller resolved is the one decided on.
func TestNextTakesTheResolvedPolicy(t *testing.T) {
	s := snap(withPolicy(func(p *policy.Spec) {}))
	s.Policy = policy.Default()
	if d := Next(s); d.Policy.Name != s.Policy.Name || d.Group != (lock.GroupRef{Policy: s.Policy.Name}) {
		t.Errorf("with the caller's resolution: policy %q group %v, want %q", d.Policy.Name, d.Group, s.Policy.Name)
	}
}

// next is Next with the node's policy resolved as the agent resolves it
// (once per change of the policies or the Node's labels), unless the test
// gave one.
func next(s Snapshot) Decision {
	if s.Policy.Name == "" {
		var labels map[string]string
		if s.Self != nil {
			labels = s.Self.Labels
		}
		s.Policy = policy.Resolve(s.Policies, labels)
	}
	return Next(s)
}

// kuredKeys is Kured's lock with one key for each of locks.
func kuredKeys(locks ...kured.Lock) *kured.Locks {
	ls := &kured.Locks{}
	for i, l := range locks {
		ls.Keys = append(ls.Keys, kured.Keyed{Key: fmt.Sprintf("k%d/kured-node-lock", i), Lock: l})
	}
	return ls
}
