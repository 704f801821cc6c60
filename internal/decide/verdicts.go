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

// gateOrder is the order in which a Waiting node's gates are checked (and
// listed): its own, the host's command, the queue, then the group's and
// the cluster's, checked by the head of the queue only.
var gateOrder = []string{GatePaused, GateNode, GateHold, GatePolicy, GateKured, GateWindow, GatePods,
	GateCommand, GateQueue, GateSpacing, GateMaxUnavailable, GateWorkloads, GatePrometheus, GateAlertmanager}

// uncheckedFrom lists the gates from first on, in gateOrder, but those in
// skip (decided already), as unchecked.
func uncheckedFrom(first string, skip ...string) []GateVerdict {
	var out []GateVerdict
	for i, g := range gateOrder {
		if i >= slices.Index(gateOrder, first) && !slices.Contains(skip, g) {
			out = append(out, GateVerdict{Gate: g, Verdict: Unchecked})
		}
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
	if d.ReportBlocked {
		d.Effects = Blocked(d.Message)
	}
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
