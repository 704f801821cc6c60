package rollout

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// LabelRollouts, on a Node, says that its host runs rollouts (the agent
// sets it to "enabled" when its configuration enables them, and removes it
// otherwise). Only such nodes take a rollout; the others it selects are
// counted as Disabled.
const LabelRollouts = "kustodian.io/rollouts"

// NodeFacts is what a rollout needs to know of a node.
type NodeFacts struct {
	Name    string
	Labels  map[string]string
	Created time.Time
}

// accepts reports whether the node's host runs rollouts.
func (n NodeFacts) accepts() bool { return n.Labels[LabelRollouts] == "enabled" }

// stopState: a node's script failed in this revision (for good, or it
// tries again); no other node starts the rollout meanwhile. A refusal
// (Refused) does not stop the others: each host checks the signature for
// itself, and the refusal is reported as a failure.
func stopState(state string) bool {
	switch state {
	case Failed, RolledBack, Retrying, RollingBack:
		return true
	}
	return false
}

// view is a rollout as the nodes see it at one moment.
type view struct {
	r        *MaintenanceRollout
	rev      string
	stages   []Stage
	selected []NodeFacts           // matched, in rank order
	eligible []NodeFacts           // selected, and their hosts run rollouts
	entries  map[string]NodeStatus // this revision's, without Cancelled ones
	stopped  *NodeStatus           // the first entry that stopped it
	failure  *NodeStatus           // the first final failure (a refusal too)
}

func newView(r *MaintenanceRollout, nodes []NodeFacts) (*view, error) {
	v := &view{r: r, rev: Revision(r.Namespace, r.Name, r.Spec), stages: StagesOf(r.Spec), entries: map[string]NodeStatus{}}
	sel := labels.Everything()
	if r.Spec.NodeSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(r.Spec.NodeSelector)
		if err != nil {
			s = labels.Nothing() // an invalid selector selects nothing (Validate says why)
		}
		sel = s
	}
	newNodes := r.Spec.NewNodes == nil || *r.Spec.NewNodes
	for _, n := range nodes {
		if !sel.Matches(labels.Set(n.Labels)) {
			continue
		}
		if !newNodes && n.Created.After(r.CreationTimestamp.Time) {
			continue
		}
		v.selected = append(v.selected, n)
	}
	slices.SortFunc(v.selected, func(a, b NodeFacts) int { return strings.Compare(rank(r, a.Name), rank(r, b.Name)) })
	for _, n := range v.selected {
		if n.accepts() {
			v.eligible = append(v.eligible, n)
		}
	}
	// Only the entries of nodes the rollout reaches count: a node it does
	// not select (a compromised one, say) can neither fill the canary's
	// place nor stop the rollout with an entry of its own.
	eligible := map[string]bool{}
	for _, n := range v.eligible {
		eligible[n.Name] = true
	}
	for _, e := range r.Status.Nodes {
		if e.Revision != v.rev || e.State == Cancelled {
			continue
		}
		if !eligible[e.Name] {
			continue
		}
		v.entries[e.Name] = e
		e := e
		if stopState(e.State) && (v.stopped == nil || failedBefore(e, *v.stopped)) {
			v.stopped = &e
		}
		if finalFailure(e.State) && (v.failure == nil || failedBefore(e, *v.failure)) {
			v.failure = &e
		}
	}
	return v, nil
}

func failedBefore(a, b NodeStatus) bool {
	switch {
	case a.Finished == nil:
		return false
	case b.Finished == nil:
		return true
	}
	return a.Finished.Before(b.Finished) || a.Finished.Equal(b.Finished) && a.Name < b.Name
}

// halted says why no node may start the rollout now, "" when one may.
func (v *view) halted() string {
	switch {
	case v.r.Spec.Aborted:
		return "the rollout was aborted"
	case v.r.Spec.Paused:
		return "the rollout is paused"
	case v.stopped != nil:
		return fmt.Sprintf("the rollout stopped: node %s is %s", v.stopped.Name, v.stopped.State)
	}
	return ""
}

// rank orders the nodes for a rollout: the same order on every node,
// another for each rollout, so that the canary is not always the same
// node.
func rank(r *MaintenanceRollout, node string) string {
	sum := sha256.Sum256([]byte(string(r.UID) + "/" + r.Name + "/" + node))
	return string(sum[:])
}

// StagesOf is the rollout's stages, or the default: one node, then all.
func StagesOf(s Spec) []Stage {
	if len(s.Stages) > 0 {
		return s.Stages
	}
	one := 1
	return []Stage{{Nodes: &one}, {All: true}}
}

// target is how many nodes a count stage reaches in all; -1 for the
// others.
func (v *view) target(s Stage) int {
	switch {
	case s.Nodes != nil:
		return min(*s.Nodes, len(v.eligible))
	case s.Percent != nil:
		return min(len(v.eligible), max(1, (*s.Percent*len(v.eligible)+99)/100))
	}
	return -1
}

// inStage reports whether stage k, or one before it, reaches node by its
// selector (selector and all stages).
func (v *view) bySelector(k int, n NodeFacts) bool {
	for _, s := range v.stages[:k+1] {
		if s.All {
			return true
		}
		if s.Selector != nil {
			sel, err := metav1.LabelSelectorAsSelector(s.Selector)
			if err == nil && sel.Matches(labels.Set(n.Labels)) {
				return true
			}
		}
	}
	return false
}

// countTarget is the number of nodes the count stages up to k reach.
func (v *view) countTarget(k int) int {
	t := 0
	for _, s := range v.stages[:k+1] {
		t = max(t, v.target(s))
	}
	return t
}

// filled reports whether stage k has reached every node it is for.
func (v *view) filled(k int) bool {
	if len(v.entries) < v.countTarget(k) {
		return false
	}
	for _, n := range v.eligible {
		if _, ok := v.entries[n.Name]; !ok && v.bySelector(k, n) {
			return false
		}
	}
	return true
}

// succeeded reports whether stage k (and every stage before it) is done:
// filled, and every node that took the rollout so far succeeded. It
// returns when its last node finished.
func (v *view) succeeded(k int) (bool, time.Time) {
	if v.stopped != nil || !v.filled(k) {
		return false, time.Time{}
	}
	last := time.Time{}
	for _, e := range v.entries {
		if e.Stage > k {
			continue
		}
		if e.State != Succeeded {
			return false, time.Time{}
		}
		if e.Finished != nil && e.Finished.After(last) {
			last = e.Finished.Time
		}
	}
	return true, last
}

// open is the stage open now, and when the next one opens by itself
// (zero: not by itself).
func (v *view) open(now time.Time) (int, time.Time) {
	o := min(max(v.r.Spec.Promoted, 0), len(v.stages)-1)
	if v.r.Spec.Promotion.Mode != PromotionAuto {
		return o, time.Time{}
	}
	soak := time.Duration(0)
	if v.r.Spec.Promotion.Soak != nil {
		soak = v.r.Spec.Promotion.Soak.Duration
	}
	for o < len(v.stages)-1 {
		ok, last := v.succeeded(o)
		if !ok {
			return o, time.Time{}
		}
		if at := last.Add(soak); now.Before(at) {
			return o, at
		}
		o++
	}
	return o, time.Time{}
}

// Verdict is whether a node takes a rollout now.
type Verdict struct {
	// Take: run the rollout on this node now, as part of Stage.
	Take  bool
	Stage int
	// Why says why not (or which stage it is in).
	Why string
	// WakeAt is when to decide again by the clock (a soak ends); zero:
	// at the next change.
	WakeAt time.Time
}

// Decide says whether node self takes rollout r now: the rollout is
// neither paused, aborted nor stopped by a failure; the node is selected,
// its host runs rollouts, it has not taken this revision; and the stage
// open now reaches it. A count stage reaches the nodes that have not taken
// it, in rank order, until its count is taken; the claim is made
// with the rollout's resourceVersion, so two nodes never take the last
// place.
func Decide(r *MaintenanceRollout, self string, nodes []NodeFacts, now time.Time) (Verdict, error) {
	v, err := newView(r, nodes)
	if err != nil {
		return Verdict{}, err
	}
	if _, ok := v.entries[self]; ok {
		return Verdict{Why: "this node took revision " + v.rev}, nil
	}
	if why := v.halted(); why != "" {
		return Verdict{Why: why}, nil
	}
	i := slices.IndexFunc(v.eligible, func(n NodeFacts) bool { return n.Name == self })
	if i < 0 {
		if slices.ContainsFunc(v.selected, func(n NodeFacts) bool { return n.Name == self }) {
			return Verdict{Why: "this node's host does not run rollouts (rollouts.enabled)"}, nil
		}
		return Verdict{Why: "the rollout does not select this node"}, nil
	}
	me := v.eligible[i]
	o, wake := v.open(now)
	for k := 0; k <= o; k++ {
		if v.bySelector(k, me) {
			return Verdict{Take: true, Stage: k, Why: fmt.Sprintf("stage %d reaches this node", k)}, nil
		}
		if t := v.countTarget(k); len(v.entries) < t {
			room := t - len(v.entries)
			for _, n := range v.eligible {
				if _, took := v.entries[n.Name]; took {
					continue
				}
				if n.Name == self {
					return Verdict{Take: true, Stage: k, Why: fmt.Sprintf("stage %d has room for this node", k)}, nil
				}
				if room--; room == 0 {
					break
				}
			}
		}
	}
	if o < len(v.stages)-1 {
		return Verdict{Why: fmt.Sprintf("stage %d does not reach this node; the next opens when promoted", o), WakeAt: wake}, nil
	}
	return Verdict{Why: "no stage reaches this node", WakeAt: wake}, nil
}
