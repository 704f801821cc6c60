// Package decide answers "what should this agent do now" (DESIGN sections 4,
// 5 and 12) as a pure function of what the agent observed: the host files,
// the records and locks, its Node, the policies, the pods on its node, the
// results of the gates it was asked to check, and a clock. It holds no
// client and no state; the agent gathers a Snapshot, calls Next, and acts.
// How the snapshot was gathered (which watches, which caches) is no concern
// of this package.
package decide

import (
	"fmt"
	"strings"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kustodian/kustodian/internal/hostfiles"
	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/policy"
)

// Snapshot is everything a decision depends on.
type Snapshot struct {
	Now  time.Time
	Node string

	// The host files.
	Request       *hostfiles.Request // nil: no request
	InProgress    bool
	RebootPending bool

	// NodeObject is this host's Node; nil when it does not exist.
	NodeObject *corev1.Node
	// Records are the node records observed, this node's own included.
	Records []lock.Record
	// OwnRecordSeen: this node's record is in the watch cache itself (not
	// only in the agent's overlay of its own writes), which proves that the
	// cache holds every record that reached the API server before it, so no
	// earlier request can be missing from the queue.
	OwnRecordSeen bool
	// Leases are the lock Leases observed, by name.
	Leases map[string]*coordv1.Lease
	// Holders are the facts about lock holders that the agent looked up
	// because a previous Decision needed them.
	Holders map[string]lock.HolderFacts

	Paused       bool
	PausedReason string
	Policies     []*policy.MaintenancePolicy
	// Kured is Kured's lock; nil when Kured is not installed or ignored.
	Kured *kured.Lock
	// Pods are the pods on this node (for blockers.podSelector).
	Pods []*corev1.Pod
	// Command is the last result of the host's gates.command; nil when it
	// was not run (or none is configured: see HasCommand).
	Command    *CommandResult
	HasCommand bool
	// Cluster is what the agent read of the cluster for the cluster-wide
	// gates; nil when it has not read it.
	Cluster *ClusterFacts

	// FailedRequest is the request whose drain failed in this run of the
	// agent (drain.onTimeout=hold).
	FailedRequest string

	Params Params
}

// Params are the agent's configuration that decisions depend on.
type Params struct {
	StaleAfter time.Duration
	TTL        time.Duration
	Owner      *lock.NodeRef
	// Poll is how often the head of a queue re-reads what is cluster-wide.
	Poll time.Duration
}

// CommandResult is the outcome of gates.command.
type CommandResult struct {
	OK     bool
	Reason string // its last line of output, or how it failed
}

// ClusterFacts are read by the head of a queue, every Poll.
type ClusterFacts struct {
	// Nodes are the cluster's Nodes (the decision keeps those of the policy).
	Nodes []NodeHealth
	// Workloads are the controllers the group's last drains disrupted.
	Workloads []Workload
	// Prometheus is the blockers.prometheus verdict; nil when not asked.
	Prometheus *PrometheusResult
	// NodesErr and WorkloadsErr say why Nodes or Workloads could not be
	// read: the gate stays closed and says so, and the agent keeps beating.
	NodesErr     string
	WorkloadsErr string
	// At is when they were read: they are read again Poll later.
	At time.Time
	// For says what the facts were read for (ClusterKey): facts read for
	// another group or another version of the policy do not count.
	For string
}

// ClusterKey names what a decision's cluster facts depend on: the group and
// the policy's cluster-wide gates.
func ClusterKey(d Decision) string {
	spec := d.Policy.Spec
	return fmt.Sprintf("%s|%v|%v|%v", d.Group, spec.Health.MaxUnavailable, spec.Health.WorkloadsRecovered, spec.Blockers.Prometheus)
}

// NodeHealth is what maxUnavailable counts.
type NodeHealth struct {
	Name          string
	Labels        map[string]string
	Ready         bool
	Unschedulable bool
}

// Workload is a controller's availability.
type Workload struct {
	Ref       string // kind/namespace/name
	Available int32
	Desired   int32
	Gone      bool
}

// PrometheusResult is what the Prometheus blocker found.
type PrometheusResult struct {
	Blocking []string // alert names firing (or the query's result)
	Err      string   // unreachable, or an error answer
}

// Gate names, for messages, status and metrics.
const (
	GatePaused         = "paused"
	GateNode           = "node"
	GateHold           = "hold"
	GatePolicy         = "policy"
	GateKured          = "kured"
	GateWindow         = "window"
	GatePods           = "pods"
	GateCommand        = "command"
	GateQueue          = "queue"
	GateSpacing        = "spacing"
	GateMaxUnavailable = "maxUnavailable"
	GateWorkloads      = "workloadsRecovered"
	GatePrometheus     = "prometheus"
)

// Verdicts of a gate.
const (
	Open      = "open"
	Closed    = "closed"
	Unchecked = "unchecked"
)

// GateVerdict is one gate's answer.
type GateVerdict struct {
	Gate    string `json:"gate"`
	Verdict string `json:"verdict"`
	Reason  string `json:"reason,omitempty"`
}

// Need is what the agent must look up before the decision can be made.
type Need struct {
	Holders []string // facts about these lock holders
	Command bool     // run gates.command
	Cluster bool     // read the cluster-wide gates
}

// Empty reports whether nothing is needed.
func (n Need) Empty() bool { return len(n.Holders) == 0 && !n.Command && !n.Cluster }

// Decision is what the agent does now.
type Decision struct {
	State lock.State
	// Policy is the node's policy, and Group its group there.
	Policy policy.Effective
	Group  lock.GroupRef
	// Locks are the Leases of the group's slots.
	Locks []string

	// For Waiting: the one line to publish, the gate that holds the node
	// (Blocked when it is the node's own, so that others pass it), every
	// gate's verdict, the queue position, and the free locks to try now.
	Message  string
	Gate     string
	Blocked  string
	Gates    []GateVerdict
	Position int
	Total    int
	Try      []string
	// ReportBlocked: emit MaintenanceBlocked (health.blockedAfter passed).
	ReportBlocked bool
	// WakeAt: decide again then at the latest (a window edge, spacing's end,
	// the next poll); zero when only events matter.
	WakeAt time.Time
	// Need: look these up and decide again.
	Need Need
}

// Held lists the lock Leases that name this node as holder, whatever their
// group: a lock taken under an older policy still counts.
func Held(leases map[string]*coordv1.Lease, node string) []string {
	var held []string
	for name, l := range leases {
		if lock.IsLockName(name) && lock.Holder(l) == node {
			held = append(held, name)
		}
	}
	return held
}

// OwnRecord is this node's record among the records, or nil.
func (s Snapshot) OwnRecord() *lock.Record {
	for i := range s.Records {
		if s.Records[i].Node == s.Node {
			return &s.Records[i]
		}
	}
	return nil
}

// Observed is the part of the snapshot the state is derived from.
func (s Snapshot) Observed() Observed {
	o := Observed{
		Request:       s.Request,
		InProgress:    s.InProgress,
		RebootPending: s.RebootPending,
		HeldLocks:     Held(s.Leases, s.Node),
		FailedRequest: s.FailedRequest,
	}
	if r := s.OwnRecord(); r != nil {
		o.ReleasedRequest = r.ReleasedRequest
	}
	if s.NodeObject != nil {
		_, o.CordonedByUs = s.NodeObject.Annotations[lock.AnnotationCordoned]
	}
	return o
}

// Next decides.
func Next(s Snapshot) Decision {
	d := Decision{State: Derive(s.Observed())}
	var nodeLabels map[string]string
	if s.NodeObject != nil {
		nodeLabels = s.NodeObject.Labels
	}
	d.Policy = policy.Resolve(s.Policies, nodeLabels)
	d.Group = lock.GroupRef{Policy: d.Policy.Name, Group: d.Policy.Group}
	d.Locks = d.Group.LockNames(d.Policy.Spec.Slots())
	if d.State == lock.Waiting {
		waiting(s, &d)
	}
	return d
}

// waiting decides for a Waiting node: its own gates first (a node whose own
// gate is closed is Blocked, and the nodes behind it pass it), then its
// place in the queue, then, only at the head, the group's and the cluster's
// gates, then the locks.
func waiting(s Snapshot, d *Decision) {
	var own []GateVerdict
	closed := func(gate, reason string) { own = append(own, GateVerdict{gate, Closed, reason}) }
	open := func(gate string) { own = append(own, GateVerdict{Gate: gate, Verdict: Open}) }
	spec := d.Policy.Spec

	if s.Paused {
		reason := "maintenance is paused"
		if s.PausedReason != "" {
			reason += ": " + s.PausedReason
		}
		closed(GatePaused, reason)
	} else {
		open(GatePaused)
	}
	if s.NodeObject == nil {
		// A lock taken now would belong to no Node (a node-bound token dies
		// with its Node, and the lock with it).
		closed(GateNode, "this host's Node object does not exist; it may not take the lock until the Node is back")
	} else {
		open(GateNode)
		if hold, ok := s.NodeObject.Annotations[lock.AnnotationHold]; ok {
			reason := "held by an admin"
			if hold != "" && hold != "true" {
				reason += ": " + hold
			}
			closed(GateHold, reason+" (kustodian-ctl resume "+s.Node+")")
		} else {
			open(GateHold)
		}
	}
	if d.Policy.Err != nil {
		closed(GatePolicy, d.Policy.Err.Error())
	} else {
		open(GatePolicy)
	}
	if why := kuredHolds(s); why != "" {
		closed(GateKured, why)
	} else {
		open(GateKured)
	}
	w := d.Policy.Schedule.At(s.Now)
	if !w.Open {
		closed(GateWindow, w.Reason)
	} else {
		open(GateWindow)
	}
	d.WakeAt = earliest(d.WakeAt, w.Change)
	if pods := blockingPods(s, spec); len(pods) > 0 {
		closed(GatePods, "blocked by pod "+strings.Join(pods, ", "))
	} else {
		open(GatePods)
	}

	firstClosed := func(vs []GateVerdict) *GateVerdict {
		for i := range vs {
			if vs[i].Verdict == Closed {
				return &vs[i]
			}
		}
		return nil
	}
	if g := firstClosed(own); g != nil {
		d.Gates = append(own, unchecked(GateCommand, GateQueue, GateSpacing, GateMaxUnavailable, GateWorkloads, GatePrometheus)...)
		d.hold(g.Gate, g.Reason, nodeSpecific(g.Gate))
		reportBlocked(s, d, spec)
		return
	}

	// The queue, with this node's own verdict in place of its published one.
	records := make([]lock.Record, 0, len(s.Records))
	for _, r := range s.Records {
		if r.Node == s.Node {
			r.Blocked = ""
		}
		records = append(records, r)
	}
	queue := lock.Queue(records, d.Group, s.Now, s.Params.StaleAfter)
	d.Position, d.Total = lock.Position(queue, s.Node)

	// Locks of the group beyond its slots (concurrency lowered since they
	// were taken) still count against them.
	mine := map[string]bool{}
	for _, name := range d.Locks {
		mine[name] = true
	}
	extra := 0
	for name, l := range s.Leases {
		if g, ok := lock.GroupOfLease(l); ok && g == d.Group && !mine[name] && lock.Holder(l) != "" && lock.Holder(l) != s.Node {
			extra++
		}
	}
	var free, holders []string
	for _, name := range d.Locks {
		l := s.Leases[name]
		if l != nil {
			if g, ok := lock.GroupOfLease(l); ok && g != d.Group {
				why := fmt.Sprintf("lock %s belongs to group %s, not %s: two policies make the same lock name; rename one of them", name, g, d.Group)
				for i := range own {
					if own[i].Gate == GatePolicy {
						own[i] = GateVerdict{GatePolicy, Closed, why}
					}
				}
				d.Gates = append(own, unchecked(GateCommand, GateQueue, GateSpacing, GateMaxUnavailable, GateWorkloads, GatePrometheus)...)
				d.hold(GatePolicy, why, false)
				return
			}
		}
		h := lock.Holder(l)
		facts := lock.HolderFacts{}
		if h != "" && h != s.Node {
			f, ok := s.Holders[h]
			if !ok && needsFacts(s, h) {
				d.Need.Holders = append(d.Need.Holders, h)
				continue
			}
			facts = f
			if !ok {
				facts = lock.HolderFacts{NodeExists: true, Record: recordOf(s, h)}
			}
		}
		if lock.Decide(l, s.Node, facts, s.Now, lock.Params{StaleAfter: s.Params.StaleAfter, TTL: s.Params.TTL, Owner: s.Params.Owner}).Free {
			free = append(free, name)
		} else {
			holders = append(holders, describeHolder(s, h))
		}
	}
	if len(d.Need.Holders) > 0 {
		return
	}
	free = free[:max(0, len(free)-extra)]
	queueMsg := queueMessage(d.Position, d.Total, holders)
	atHead := s.OwnRecordSeen && d.Position > 0 && lock.MayTry(queue, s.Node, len(free))

	if s.HasCommand {
		switch {
		case !atHead:
			own = append(own, GateVerdict{Gate: GateCommand, Verdict: Unchecked, Reason: "checked at the head of the queue"})
		case s.Command == nil:
			d.Need.Command = true
			return
		case !s.Command.OK:
			closed(GateCommand, "gate command: "+s.Command.Reason)
		default:
			open(GateCommand)
		}
	} else {
		open(GateCommand)
	}
	if g := firstClosed(own); g != nil {
		d.Gates = append(own, unchecked(GateQueue, GateSpacing, GateMaxUnavailable, GateWorkloads, GatePrometheus)...)
		d.hold(g.Gate, g.Reason, true)
		d.WakeAt = earliest(d.WakeAt, s.Now.Add(s.Params.Poll))
		reportBlocked(s, d, spec)
		return
	}
	if !atHead {
		d.Gates = append(own, GateVerdict{GateQueue, Closed, strings.TrimPrefix(queueMsg, "waiting: ")})
		d.Gates = append(d.Gates, unchecked(GateSpacing, GateMaxUnavailable, GateWorkloads, GatePrometheus)...)
		d.Message = queueMsg
		d.Gate = GateQueue
		return
	}
	own = append(own, GateVerdict{Gate: GateQueue, Verdict: Open, Reason: queueMsg})

	// At the head: the group's and the cluster's gates.
	group := groupGates(s, d, spec)
	d.Gates = append(own, group...)
	if d.Need.Cluster {
		return
	}
	if g := firstClosed(group); g != nil {
		d.hold(g.Gate, g.Reason, false)
		reportBlocked(s, d, spec)
		return
	}
	d.Try = free
	d.Message = queueMsg
}

// nodeSpecific gates close for one node and not for the others of its
// group: only those make it Blocked, so that the queue passes it. A gate
// closed for the whole group (paused, Kured, the window) keeps the head the
// head: when it opens, the head goes, not every node at once.
func nodeSpecific(gate string) bool {
	switch gate {
	case GateNode, GateHold, GatePolicy, GatePods, GateCommand:
		return true
	}
	return false
}

// hold makes a closed gate the node's message; node-specific gates also
// make it Blocked, so that the queue passes it.
func (d *Decision) hold(gate, reason string, own bool) {
	d.Gate = gate
	d.Message = "waiting: " + reason
	if own {
		d.Blocked = reason
	}
}

func unchecked(gates ...string) []GateVerdict {
	out := make([]GateVerdict, len(gates))
	for i, g := range gates {
		out[i] = GateVerdict{Gate: g, Verdict: Unchecked}
	}
	return out
}

func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// reportBlocked asks for MaintenanceBlocked once the node has waited past
// health.blockedAfter with a gate closed.
func reportBlocked(s Snapshot, d *Decision, spec policy.Spec) {
	after := spec.BlockedAfterDuration()
	r := s.OwnRecord()
	if after <= 0 || r == nil || r.State != lock.Waiting || r.Since.IsZero() || d.Gate == GatePaused {
		return
	}
	since := r.Since.Add(after)
	if s.Now.Before(since) {
		d.WakeAt = earliest(d.WakeAt, since)
		return
	}
	d.Message += fmt.Sprintf(" (blocked since %s)", r.Since.UTC().Format("2006-01-02 15:04 UTC"))
	d.ReportBlocked = !r.BlockedReported
}

// needsFacts: whether a held lock's holder needs a look-up (is its Node
// gone?). A live holder keeps its lock whatever its Node does.
func needsFacts(s Snapshot, holder string) bool {
	r := recordOf(s, holder)
	return r == nil || !r.Live(s.Now, s.Params.StaleAfter)
}

func recordOf(s Snapshot, node string) *lock.Record {
	for i := range s.Records {
		if s.Records[i].Node == node {
			return &s.Records[i]
		}
	}
	return nil
}

// describeHolder names a lock holder and, from its record, what it does:
// "node-a (Draining)". No elapsed time: a message that changes every
// second would make every waiting agent rewrite its record, and every write
// wakes every agent.
func describeHolder(s Snapshot, holder string) string {
	r := recordOf(s, holder)
	if r == nil || r.State == "" {
		return holder
	}
	return fmt.Sprintf("%s (%s)", holder, r.State)
}

func queueMessage(pos, total int, holders []string) string {
	if pos == 0 {
		return "waiting: joining the queue"
	}
	msg := fmt.Sprintf("waiting: position %d of %d", pos, total)
	if len(holders) > 0 {
		msg += ", lock held by " + strings.Join(holders, ", ")
	}
	return msg
}

// kuredHolds says why Kured's lock keeps this node from taking its turn:
// it is full with other holders, Kustodian agents included (the same rule
// as Kured's Acquire, so that a node never takes its own lock only to give
// it back because Kured's is full).
func kuredHolds(s Snapshot) string {
	if s.Kured == nil {
		return ""
	}
	me := kured.HolderID(s.Node)
	if !s.Kured.Full(me, s.Now) {
		return ""
	}
	return "Kured's lock is held by " + strings.Join(s.Kured.Others(me, s.Now), ", ")
}

// blockingPods are the non-terminated pods on the node that the policy's
// blockers.podSelector matches.
func blockingPods(s Snapshot, spec policy.Spec) []string {
	if spec.Blockers.PodSelector == nil {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(spec.Blockers.PodSelector)
	if err != nil {
		return nil // the policy gate reports it
	}
	var out []string
	for _, p := range s.Pods {
		if p.Spec.NodeName != s.Node || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p.Namespace+"/"+p.Name)
		}
	}
	return out
}
