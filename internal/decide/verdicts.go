package decide

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/policy"
)

// Gate names, for messages, status and metrics.
const (
	GatePaused         = "paused"
	GateFormat         = "format"
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
	GateAlertmanager   = "alertmanager"
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

// ownGates are the node's own gates, in gateOrder: what holds this node
// whatever its place in the queue. wake is when the window opens or
// closes. mismatch, when set, says why the group's locks cannot be
// decided on (a lock of another group under one of their names): the
// policy gate says it too.
func ownGates(s Snapshot, d *Decision) (own []GateVerdict, wake time.Time, mismatch string) {
	verdict := func(gate, closedWhy string) {
		if closedWhy != "" {
			own = append(own, GateVerdict{gate, Closed, closedWhy})
		} else {
			own = append(own, GateVerdict{Gate: gate, Verdict: Open})
		}
	}
	paused := ""
	if s.Paused {
		paused = "maintenance is paused"
		if s.PausedReason != "" {
			paused += ": " + s.PausedReason
		}
	}
	verdict(GatePaused, paused)
	verdict(GateFormat, unreadable(s, d))
	if s.Self == nil {
		// A lock taken now would belong to no Node (a node-bound token dies
		// with its Node, and the lock with it).
		verdict(GateNode, "this host's Node object does not exist; it may not take the lock until the Node is back")
	} else {
		verdict(GateNode, "")
		held := ""
		if s.Self.Held {
			held = "held by an admin"
			if hold := s.Self.HoldReason; hold != "" && hold != "true" {
				held += ": " + hold
			}
			held += " (kustodian-ctl resume " + s.Node + ")"
		}
		verdict(GateHold, held)
	}
	// The group's locks: a lock of another group under this name is a
	// policy to fix.
	policyWhy := ""
	if d.Policy.Err != nil {
		policyWhy = d.Policy.Err.Error()
	}
	for _, name := range d.Locks {
		if l, ok := s.Locks[name]; ok && l.Grouped && l.Group != d.Group {
			mismatch = fmt.Sprintf("lock %s belongs to group %s, not %s: two policies make the same lock name; rename one of them", name, l.Group, d.Group)
			policyWhy = mismatch
			break
		}
	}
	verdict(GatePolicy, policyWhy)
	verdict(GateKured, kuredHolds(s))
	pods := ""
	if p := blockingPods(s, d.Policy.Spec); len(p) > 0 {
		pods = "blocked by pod " + strings.Join(p, ", ")
	}
	w := d.Policy.Schedule.At(s.Now)
	window := ""
	if !w.Open {
		window = w.Reason
	}
	verdict(GateWindow, window)
	verdict(GatePods, pods)
	return own, w.Change, mismatch
}

// unreadable says why this node may not take its turn: one of its group's
// locks, its group's queue summary or a record of its queue is in a newer
// format (another group's are no matter); "" when none is.
func unreadable(s Snapshot, d *Decision) string {
	for _, name := range append([]string{d.Group.QueueName()}, d.Locks...) {
		if why, ok := s.Unreadable[name]; ok {
			return why
		}
	}
	var records []string
	for name := range s.Unreadable {
		if lock.IsRecordName(name) { // only a LIST of its own group's finds one
			records = append(records, name)
		}
	}
	if len(records) == 0 {
		return ""
	}
	slices.Sort(records)
	return s.Unreadable[records[0]]
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
		if p.NodeName != s.Node || p.Ended {
			continue
		}
		if sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p.Namespace+"/"+p.Name)
		}
	}
	return out
}
