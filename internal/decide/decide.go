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
	"time"

	"github.com/kustodian/kustodian/internal/hostfiles"
	"github.com/kustodian/kustodian/internal/jobs"
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

	// Self is what the decisions read of this host's Node; nil when the
	// Node does not exist.
	Self *NodeFacts
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
	// Listed: Mine was just made, for this decision, from a LIST.
	Listed bool
	// Watching is when the agent began to watch the queues: a summary
	// that has not changed since counts from then.
	Watching time.Time
	// Locks are the lock Leases observed, read once (lock.LocksOf), by
	// name.
	Locks map[string]lock.Lock
	// Holders are the facts about lock holders that the agent looked up
	// because a previous Decision needed them.
	Holders map[string]lock.HolderFacts

	Paused       bool
	PausedReason string
	// Unreadable are the Leases in a format newer than this agent reads
	// (lock.FormatError), by name, with why: the locks and queue
	// summaries observed, and a record its last LIST of its group found.
	Unreadable map[string]string
	Policies   []*policy.MaintenancePolicy
	// Policy is this node's policy among Policies, resolved by the caller
	// once per change of the policies or the Node's labels.
	Policy policy.Effective
	// Kured is Kured's lock; nil when Kured is not installed or ignored.
	Kured *kured.Locks
	// Pods are the pods on this node (for blockers.podSelector).
	Pods []PodFacts
	// Command is the last result of the host's gates.command; nil when it
	// was not run (or none is configured: see HasCommand).
	Command    *CommandResult
	HasCommand bool
	// Cluster is what the agent read of the cluster for the cluster-wide
	// gates; nil when it has not read it.
	Cluster *ClusterFacts

	// FailedRequest is the request whose drain failed in this run of the
	// agent (drain.onTimeout=hold), and FailedWhy why.
	FailedRequest string
	FailedWhy     string

	Params Params

	// Drain is the drain this agent runs or ran; nil when none.
	Drain *DrainRun
	// DrainLookups are what a Draining node's decision asked to be looked
	// up (Need), once looked up.
	DrainLookups DrainLookups
	// Job is the maintenance's managed job as looked up (Need.Job); nil:
	// not looked up.
	Job *JobLookup
}

// JobLookup is the maintenance's current managed job and what its next
// step depends on (jobs.Next), looked up when the node is in maintenance.
type JobLookup struct {
	// Job is nil when there is none: the script keeps the maintenance
	// itself.
	Job   *jobs.Job
	Facts jobs.Facts
	// Err: the job could not be looked up (its file, or whether it runs);
	// the step does everything else first, then ends with it.
	Err error
}

// NodeFacts are what decisions read of this host's Node.
type NodeFacts struct {
	Labels map[string]string
	// Held: an admin holds the node (kustodian-ctl pause NODE, the
	// annotation kustodian.io/hold); HoldReason is the hold's value ("" or
	// "true" when it was given without a reason).
	Held       bool
	HoldReason string
	// CordonedByUs: Kustodian's cordon mark (kustodian.io/cordoned) is on
	// the Node.
	CordonedByUs bool
	// Quarantined: a policy's quarantine mark is on the Node.
	Quarantined bool
	// Cordoned: the Node is unschedulable.
	Cordoned bool
}

// PodFacts are what decisions read of a pod (blockers.podSelector).
type PodFacts struct {
	Namespace, Name string
	NodeName        string
	Labels          map[string]string
	// Ended: the pod succeeded or failed; it blocks nothing any more.
	Ended bool
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
	// ReleaseOnTimeout: drain.onTimeout is release (a drain that timed out
	// gives the node back and queues again) rather than hold.
	ReleaseOnTimeout bool
	// RequestFile is the host's request file, as messages name it.
	RequestFile string
}

// QueueState is a group's queue summary as the agent sees it.
type QueueState struct {
	Summary lock.Summary
	// Err: the summary does not read (it counts as none).
	Err error
	// Seen is when the agent saw the Lease change last: a head that waits
	// renews it, so a summary unchanged for long means its head is gone.
	// Changed is when it saw the summary itself change: a renewal by
	// another node than the head is a claim (see takeoverAfter).
	Seen, Changed time.Time
}

// CommandResult is the outcome of gates.command.
type CommandResult struct {
	OK     bool
	Reason string // its last line of output, or how it failed
	// At is when it ran (zero: just now): a result Params.Poll old is run
	// again.
	At time.Time
}

// stale reports whether facts got at are Params.Poll old: they are looked
// up again. Zero stands for facts got just now.
func (s Snapshot) stale(at time.Time) bool {
	return !at.IsZero() && s.Now.Sub(at) >= s.Params.Poll
}

// ClusterFacts are read by the head of a queue, every Poll.
type ClusterFacts struct {
	// Nodes are the cluster's Nodes (the decision keeps those of the policy).
	Nodes []lock.NodeHealth
	// Workloads are the controllers the group's last drains disrupted.
	Workloads []Workload
	// Prometheus is the blockers.prometheus verdict; nil when not asked.
	Prometheus *PrometheusResult
	// Alertmanager is the blockers.alertmanager verdict; nil when not
	// asked.
	Alertmanager *PrometheusResult
	// NodesErr and WorkloadsErr say why Nodes or Workloads could not be
	// read: the gate stays closed and says so, and the agent keeps beating.
	NodesErr     string
	WorkloadsErr string
	// At is when they were read (zero: just now): they are read again
	// Poll later.
	At time.Time
	// For says what the facts were read for (ClusterKey): facts read for
	// another group or another version of the policy do not count.
	For string
}

// ClusterKey names what a decision's cluster facts depend on: the group and
// the policy's cluster-wide gates.
func ClusterKey(d Decision) string {
	spec := d.Policy.Spec
	return fmt.Sprintf("%s|%v|%v|%v|%v|%v", d.Group, spec.Health.MaxUnavailable, spec.Health.WorkloadsRecovered, spec.Blockers.Prometheus,
		spec.Blockers.Alertmanager, spec.Alertmanager)
}

// Workload is a controller's availability.
type Workload struct {
	Ref       string // kind/namespace/name
	Available int32
	Desired   int32
	Gone      bool
}

// PrometheusResult is what the Prometheus (or Alertmanager) blocker found.
type PrometheusResult struct {
	Blocking []string // alert names firing, active (or the query's result)
	Err      string   // unreachable, or an error answer
}

// Need is what the agent must look up before the decision can be made.
type Need struct {
	Holders []string // facts about these lock holders
	Command bool     // run gates.command
	Cluster bool     // read the cluster-wide gates
	Queue   bool     // make this node's own view of the queue (Mine): one LIST
	// For a Draining node (DrainLookups): hold Kured's lock for it, count
	// the policy's quarantined nodes, read the policy's locks and Nodes
	// afresh for maxUnavailable.
	Kured, Quarantine, Overbooking bool
	// Job: the maintenance's managed job (JobLookup), for a node in
	// maintenance or about to be.
	Job bool
}

// Empty reports whether nothing is needed.
func (n Need) Empty() bool {
	return len(n.Holders) == 0 && !n.Command && !n.Cluster && !n.Queue && !n.Kured && !n.Quarantine && !n.Overbooking && !n.Job
}

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
	// Ahead is how many nodes are known to wait ahead of it: Position-1,
	// or, behind a cut summary, the nodes it names.
	Ahead int
	Try   []string
	// ReportBlocked: health.blockedAfter passed, and it was not said yet
	// (Effects say it).
	ReportBlocked bool
	// Effects: what the step makes known.
	Effects []Effect
	// WakeAt: decide again then at the latest (a window edge, spacing's end,
	// the next poll); zero when only events matter.
	WakeAt time.Time
	// Need: look these up and decide again.
	Need Need
	// Renominate, when set, says why this node must make the group's
	// queue summary again (one LIST, one write) before it goes on.
	Renominate string
	// Takeover: Renominate takes the turn of a head that seems gone (the
	// summary has not changed for long with a slot free); the node claims
	// it first (Step.Claim).
	Takeover bool
	// Touch: this node heads the queue and waits on a gate with a slot
	// free; it renews the summary so that the nodes behind it know it is
	// alive.
	Touch bool
	// Unlisted: the LIST just made (Snapshot.Listed) does not show this
	// node's record as this agent last wrote it; the step writes it again.
	Unlisted bool

	// Drain: for Draining, the step.
	Drain DrainStep

	// Steps: what the agent does, in order, to carry the decision out
	// (once nothing is needed).
	Steps []Step
}

// Observed is the part of the snapshot the state is derived from.
func (s Snapshot) Observed() Observed {
	o := Observed{
		Request:       s.Request,
		InProgress:    s.InProgress,
		RebootPending: s.RebootPending,
		HeldLocks:     lock.HeldIn(s.Locks, s.Node),
		FailedRequest: s.FailedRequest,
	}
	if r := s.Own; r != nil {
		o.ReleasedRequest = r.ReleasedRequest
	}
	if s.Self != nil {
		o.CordonedByUs = s.Self.CordonedByUs
	}
	return o
}

// Next decides.
func Next(s Snapshot) Decision {
	o := s.Observed()
	d := Decision{State: Derive(o), Policy: s.Policy}
	d.Group = lock.GroupRef{Policy: d.Policy.Name, Group: d.Policy.Group}
	d.Locks = d.Group.LockNames(d.Policy.Spec.Slots())
	switch d.State {
	case lock.Waiting:
		waiting(s, &d)
	case lock.Draining:
		draining(s, o, &d)
	case lock.Completing, lock.Failed:
		d.Message = ending(s, o, d.State)
	}
	if s.Job == nil && (d.State == lock.InMaintenance || d.State == lock.Draining && d.Need.Empty() && d.Drain.Do == DrainDrained) {
		d.Need.Job = true
	}
	if d.Need.Empty() {
		plan(s, o, &d)
	}
	return d
}
