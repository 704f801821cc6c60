// Package decide answers "what should this agent do now" (docs/design.md,
// "States" and "Locks and the queue"; docs/policy.md) as a pure function of what the agent observed: the host files,
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
	"k8s.io/apimachinery/pkg/util/resourceversion"

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
	// Own is this node's record as last seen or written; nil when it has
	// none.
	Own *lock.Record
	// Queues are the groups' queue summaries (the queue-* Leases), by
	// Lease name.
	Queues map[string]QueueState
	// Mine is the queue of this node's group as this agent last made it
	// from a LIST of the records (when it joined the queue, or made the
	// summary); nil when it has not yet.
	Mine *lock.Summary
	// Watching is when the agent began to watch the queues: a summary
	// that has not changed since counts from then.
	Watching time.Time
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
	// Heartbeat is how often agents write their record.
	Heartbeat time.Duration
	TTL       time.Duration
	Owner     *lock.NodeRef
	// Jitter, in [0, 1), spreads the nodes that the queue's summary does
	// not name when they find its head gone (the same for a node every
	// time: a hash of its name).
	Jitter float64
	// Poll is how often the head of a queue re-reads what is cluster-wide.
	Poll time.Duration
}

// QueueState is a group's queue summary as the agent sees it.
type QueueState struct {
	Summary lock.Summary
	// Err: the summary does not read (it counts as none).
	Err error
	// Seen is when the agent saw the Lease change last: a head that waits
	// renews it, so a summary unchanged for long means its head is gone.
	Seen time.Time
}

// CommandResult is the outcome of gates.command.
type CommandResult struct {
	OK     bool
	Reason string // its last line of output, or how it failed
}

// ClusterFacts are read by the head of a queue, every Poll.
type ClusterFacts struct {
	// Nodes are the cluster's Nodes (the decision keeps those of the policy).
	Nodes []lock.NodeHealth
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
	Queue   bool     // make this node's own view of the queue (Mine): one LIST
}

// Empty reports whether nothing is needed.
func (n Need) Empty() bool { return len(n.Holders) == 0 && !n.Command && !n.Cluster && !n.Queue }

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
	// BehindCut: the node's place is not known (Position 0) because it is
	// behind the first names of a queue too long for its summary.
	BehindCut bool
	Try       []string
	// ReportBlocked: emit MaintenanceBlocked (health.blockedAfter passed).
	ReportBlocked bool
	// WakeAt: decide again then at the latest (a window edge, spacing's end,
	// the next poll); zero when only events matter.
	WakeAt time.Time
	// Need: look these up and decide again.
	Need Need
	// Renominate, when set, says why this node must make the group's
	// queue summary again (one LIST, one write) before it goes on.
	Renominate string
	// Touch: this node heads the queue and waits on a gate with a slot
	// free; it renews the summary so that the nodes behind it know it is
	// alive.
	Touch bool
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

// Observed is the part of the snapshot the state is derived from.
func (s Snapshot) Observed() Observed {
	o := Observed{
		Request:       s.Request,
		InProgress:    s.InProgress,
		RebootPending: s.RebootPending,
		HeldLocks:     Held(s.Leases, s.Node),
		FailedRequest: s.FailedRequest,
	}
	if r := s.Own; r != nil {
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

	// The group's locks: a lock of another group under this name is a
	// policy to fix.
	for _, name := range d.Locks {
		if l := s.Leases[name]; l != nil {
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
	}
	q := s.queueOf(d.Group)
	free, holders := freeLocks(s, d, q)
	if len(d.Need.Holders) > 0 {
		return
	}
	queueMsg := q.message(holders)
	d.Position, d.Total = q.position()
	d.BehindCut = q.at < 0 && q.mine < 0 && q.state != nil && q.state.Summary.Cut()
	atHead := q.at >= 0 && q.at < len(free)

	if g := firstClosed(own); g != nil {
		d.Gates = append(own, unchecked(GateCommand, GateQueue, GateSpacing, GateMaxUnavailable, GateWorkloads, GatePrometheus)...)
		d.hold(g.Gate, g.Reason, nodeSpecific(g.Gate))
		reportBlocked(s, d, spec)
		if nodeSpecific(g.Gate) {
			// Its turn passes to the next node, once its record says it
			// is blocked (or the summary made again would name it still).
			if q.at >= 0 && q.at < max(len(free), 1) && s.Own != nil && s.Own.Blocked != "" {
				d.Renominate = "this node heads the queue but is blocked: " + g.Reason
			}
			return
		}
		// A gate closed for the whole group: the head stays the head.
		if !queueUpkeep(s, d, q, free, atHead) {
			touch(s, d, q, free)
		}
		return
	}
	if queueUpkeep(s, d, q, free, atHead) {
		d.Gates = append(own, GateVerdict{GateQueue, Closed, strings.TrimPrefix(queueMsg, "waiting: ")})
		d.Gates = append(d.Gates, unchecked(GateCommand, GateSpacing, GateMaxUnavailable, GateWorkloads, GatePrometheus)...)
		d.Message = queueMsg
		d.Gate = GateQueue
		return
	}

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
		if s.Own != nil && s.Own.Blocked != "" {
			d.Renominate = "this node heads the queue but is blocked: " + g.Reason
		}
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
		touch(s, d, q, free)
		return
	}
	d.Try = free
	d.Message = queueMsg
}

// queueView is where this node stands in its group's queue.
type queueView struct {
	state *QueueState // the stored summary; nil when there is none that reads
	// named are the nodes the stored summary names that hold no lock: the
	// queue still ahead, in order; at is this node's index there, or -1.
	named []string
	at    int
	// total counts the named and those the summary was too short for.
	total int
	// mine is this node's index in its own view (Snapshot.Mine), or -1,
	// and mineTotal that view's length.
	mine, mineTotal int
	seen            time.Time // when the summary last changed
}

// queueOf reads the group's summary.
func (s Snapshot) queueOf(g lock.GroupRef) queueView {
	v := queueView{at: -1, mine: -1, seen: s.Watching}
	holding := map[string]bool{}
	for name, l := range s.Leases {
		if h := lock.Holder(l); h != "" && lock.IsLockName(name) {
			holding[h] = true
		}
	}
	notHolding := func(nodes []string) []string {
		var out []string
		for _, n := range nodes {
			if !holding[n] {
				out = append(out, n)
			}
		}
		return out
	}
	if qs, ok := s.Queues[g.QueueName()]; ok && qs.Err == nil {
		v.state = &qs
		v.named = notHolding(qs.Summary.Nodes)
		v.total = len(v.named) + qs.Summary.Total - len(qs.Summary.Nodes)
		v.at = index(v.named, s.Node)
		if qs.Seen.After(v.seen) {
			v.seen = qs.Seen
		}
	}
	if s.Mine != nil {
		mine := notHolding(s.Mine.Nodes)
		v.mine = index(mine, s.Node)
		v.mineTotal = len(mine) + s.Mine.Total - len(s.Mine.Nodes)
	}
	return v
}

func index(nodes []string, node string) int {
	for i, n := range nodes {
		if n == node {
			return i
		}
	}
	return -1
}

// position is the node's place (1 for the head) and the queue's length as
// the message says them; 0, 0 while it is not known.
func (v queueView) position() (int, int) {
	switch {
	case v.at >= 0:
		return v.at + 1, max(v.total, v.at+1)
	case v.mine >= 0:
		return v.mine + 1, max(v.mineTotal, v.mine+1)
	}
	return 0, 0
}

// message is the node's place: "waiting: position 3 of 7, lock held by b".
func (v queueView) message(holders []string) string {
	var msg string
	switch {
	case v.at >= 0:
		at, total := v.position()
		msg = fmt.Sprintf("waiting: position %d of %d", at, total)
	case v.mine >= 0:
		// Its own view, made when it joined: the nodes behind it since
		// are counted at the next handoff.
		at, total := v.position()
		msg = fmt.Sprintf("waiting: position %d of %d on joining", at, total)
	case v.state != nil && v.state.Summary.Cut():
		msg = fmt.Sprintf("waiting: in the queue behind the first %d", len(v.named))
	default:
		msg = "waiting: joining the queue"
	}
	if len(holders) > 0 {
		msg += ", lock held by " + strings.Join(holders, ", ")
	}
	return msg
}

// freeLocks are the group's locks this node may take if its turn comes,
// and the holders of the others. Locks of the group beyond its slots
// (concurrency lowered since they were taken) still count against them.
// Whether a holder's lock may be taken over is looked up (Need.Holders)
// only for an agent that may take over (no Owner) and only near the head.
func freeLocks(s Snapshot, d *Decision, q queueView) (free, holders []string) {
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
	nearHead := (q.at >= 0 && q.at < len(d.Locks)) || (q.at < 0 && q.mine >= 0 && q.mine < len(d.Locks))
	for _, name := range d.Locks {
		l := s.Leases[name]
		h := lock.Holder(l)
		facts := lock.HolderFacts{}
		if h != "" && h != s.Node {
			f, ok := s.Holders[h]
			switch {
			case ok:
				facts = f
			case s.Params.Owner == nil && nearHead:
				d.Need.Holders = append(d.Need.Holders, h)
				continue
			default:
				// Its record is not watched: a holder counts as there.
				facts = lock.HolderFacts{NodeExists: true}
			}
		}
		if lock.Decide(l, s.Node, facts, s.Now, lock.Params{StaleAfter: s.Params.StaleAfter, TTL: s.Params.TTL, Owner: s.Params.Owner}).Free {
			free = append(free, name)
		} else {
			holders = append(holders, h)
		}
	}
	return free[:max(0, len(free)-extra)], holders
}

// queueUpkeep keeps the group's summary true for an eligible node (no gate
// of its own closed) and says whether the decision must wait for it:
//   - a node the summary does not name makes its own view (Mine, one LIST)
//     when it has none, or when the summary left it out and is newer;
//     when its view makes it a head, it writes it (Renominate);
//   - with a slot free, a node behind the heads makes the summary again
//     once it has not changed for a while (each a heartbeat later than the
//     one before it, and those it does not name later still): its head is
//     gone, or it would have renewed it (Touch).
func queueUpkeep(s Snapshot, d *Decision, q queueView, free []string, atHead bool) bool {
	if q.at < 0 {
		// Its record first: the LIST must see it eligible, and in this
		// group. A record written under another group (its Node was gone,
		// or the policy changed since) is left out of this group's LIST;
		// looking again before it is written anew would never end.
		if s.Own == nil || s.Own.State != lock.Waiting || s.Own.Blocked != "" || s.Own.GroupRef() != d.Group {
			return false
		}
		stale := s.Mine == nil || (q.mine < 0 && !s.Mine.Cut()) ||
			(q.state != nil && newer(q.state.Summary.ListRV, s.Mine.ListRV) && leftOut(q.state.Summary, *s.Own))
		if stale {
			d.Need.Queue = true
			return true
		}
		if q.mine >= 0 && q.mine < len(free) {
			d.Renominate = "this node heads the queue and its summary does not say so"
			return true
		}
	}
	if len(free) == 0 || atHead {
		return false
	}
	hb := s.Params.Heartbeat
	var due time.Time
	if q.at >= 0 {
		due = q.seen.Add(s.Params.StaleAfter + time.Duration(q.at-len(free)+1)*hb)
	} else {
		due = q.seen.Add(s.Params.StaleAfter + time.Duration(len(q.named)-len(free)+2)*hb +
			time.Duration(s.Params.Jitter*float64(s.Params.StaleAfter)))
	}
	if s.Now.Before(due) {
		d.WakeAt = earliest(d.WakeAt, due)
		return false
	}
	head := "its head"
	if len(q.named) > 0 {
		head = q.named[0]
	}
	d.Renominate = fmt.Sprintf("a lock is free and the queue has not moved for %s: %s is gone", s.Now.Sub(q.seen).Round(time.Second), head)
	return true
}

// touch: the head waits on a gate with a slot free; it renews the summary
// every two heartbeats, so that the nodes behind it know it is alive.
func touch(s Snapshot, d *Decision, q queueView, free []string) {
	if q.at != 0 || len(free) == 0 || q.state == nil {
		return
	}
	due := q.seen.Add(2 * s.Params.Heartbeat)
	if s.Now.Before(due) {
		d.WakeAt = earliest(d.WakeAt, due)
		return
	}
	d.Touch = true
}

// newer reports whether resource version a is newer than b.
func newer(a, b string) bool {
	cmp, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && cmp > 0
}

// leftOut reports whether the summary should name own and does not: own's
// record reached the API server before the summary's LIST and the summary
// was not cut short, or own sorts before the last node it names (a higher
// priority).
func leftOut(s lock.Summary, own lock.Record) bool {
	if s.Index(own.Node) >= 0 {
		return false
	}
	p := lock.PlaceOf(own)
	if s.Last != nil && p.Before(*s.Last) {
		return true
	}
	return !s.Cut() && !newer(p.Key, s.ListRV)
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
	r := s.Own
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
