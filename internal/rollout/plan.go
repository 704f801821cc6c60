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
	// reach is, by stage, the names of the nodes the stage is for, with
	// the stages before it (reaches).
	reach []map[string]bool
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
		if e.Revision != v.rev || e.State == Cancelled || e.Stage < 0 {
			continue // a negative stage: none (the CRD refuses it)
		}
		if !eligible[e.Name] {
			continue
		}
		e.Stage = v.deferredTo(e)
		v.entries[e.Name] = e
		e := e
		if stopState(e.State) && (v.stopped == nil || failedBefore(e, *v.stopped)) {
			v.stopped = &e
		}
		if finalFailure(e.State) && (v.failure == nil || failedBefore(e, *v.failure)) {
			v.failure = &e
		}
	}
	v.reaches()
	return v, nil
}

// deferredTo is the stage an entry is of. A deferral to a stage beyond
// the last (the rollout's stages were shortened since it was written) is
// to the last, when that stage is not a count: all, or a selector, reaches
// the node; beyond a last count stage the node waits for none.
func (v *view) deferredTo(e NodeStatus) int {
	last := len(v.stages) - 1
	if e.State != Deferred || e.Stage <= last || v.target(v.stages[last]) >= 0 {
		return e.Stage
	}
	return last
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

// reaches works out, stage by stage, the nodes each stage is for, with
// the stages before it (stages are cumulative): every node for all; those
// it selects for a selector; for a count, the nodes in rank order until it
// has its count in all (the nodes of earlier stages, by selector too,
// count toward it). A count stage's places go by rank alone, whoever wrote
// an entry: a node the rollout selects cannot take the canary's place out
// of turn with an entry of its own. A node whose entry is of a later stage
// (it took that stage, or deferred to it: Deferred) is not a candidate for
// the stages before it, and the next node in rank order takes its place
// there; that is how a node whose agent came late leaves a place taken
// before it could ask (Decide) to the node that took it.
func (v *view) reaches() {
	prev := map[string]bool{}
	for k, s := range v.stages {
		cur := make(map[string]bool, len(prev))
		for n := range prev {
			cur[n] = true
		}
		var cands []NodeFacts
		for _, n := range v.eligible {
			if e, ok := v.entries[n.Name]; ok && e.Stage > k {
				continue
			}
			cands = append(cands, n)
		}
		switch {
		case s.All:
			for _, n := range cands {
				cur[n.Name] = true
			}
		case s.Selector != nil:
			sel, err := metav1.LabelSelectorAsSelector(s.Selector)
			if err != nil {
				break // Validate says why
			}
			for _, n := range cands {
				if sel.Matches(labels.Set(n.Labels)) {
					cur[n.Name] = true
				}
			}
		default:
			t := v.target(s)
			for _, n := range cands {
				if len(cur) >= t {
					break
				}
				cur[n.Name] = true
			}
		}
		v.reach = append(v.reach, cur)
		prev = cur
	}
}

// took reports whether node took the rollout's revision (an entry that is
// no deferral).
func (v *view) took(node string) bool {
	e, ok := v.entries[node]
	return ok && e.State != Deferred
}

// filled reports whether stage k has reached every node it is for: each
// took the rollout (in stage k or before, by reaches).
func (v *view) filled(k int) bool {
	for n := range v.reach[k] {
		if !v.took(n) {
			return false
		}
	}
	return true
}

// succeeded reports whether stage k (and every stage before it) is done:
// filled, and every node that took the rollout so far succeeded. It
// returns when its last node finished, as the entries say: a time the
// nodes wrote, an estimate for display only (Estimate), never what a soak
// runs from.
func (v *view) succeeded(k int) (bool, time.Time) {
	if v.stopped != nil || !v.filled(k) {
		return false, time.Time{}
	}
	last := time.Time{}
	for _, e := range v.entries {
		if e.Stage > k || e.State == Deferred {
			continue // a deferred node of stage k took nothing: filled says whether it must
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

// Seen is when an agent first saw each stage of a rollout's revision
// succeed, by stage: the soak of automatic promotion runs from then. It is
// the agent's own observation, kept on its host, and never a time read from
// the rollout: the entries' times are the nodes' to write, and a
// compromised node's finished: 2000-01-01 would end any soak. A stage that
// succeeded and is not in Seen soaks from now.
type Seen map[int]time.Time

// Estimate is Seen for a reader that saw nothing itself (kustodian-ctl):
// each stage that succeeded, seen when its last node finished as the
// entries say. The agents time their soaks from when each saw the stage
// succeed, later, and a node can write any time in its entry: what this
// gives is an estimate to show, never one to act on.
func Estimate(r *MaintenanceRollout, nodes []NodeFacts) (Seen, error) {
	v, err := newView(r, nodes)
	if err != nil {
		return nil, err
	}
	seen := Seen{}
	for k := range v.stages {
		if ok, last := v.succeeded(k); ok {
			seen[k] = last
		}
	}
	return seen, nil
}

// open is the stage open now, and when the next one opens by itself
// (zero: not by itself). With automatic promotion, a stage that succeeded
// opens the next once soak has passed since it was seen to succeed.
func (v *view) open(now time.Time, seen Seen) (int, time.Time) {
	o := min(max(v.r.Spec.Promoted, 0), len(v.stages)-1)
	if v.r.Spec.Promotion.Mode != PromotionAuto {
		return o, time.Time{}
	}
	soak := v.soak()
	for o < len(v.stages)-1 {
		if ok, _ := v.succeeded(o); !ok {
			return o, time.Time{}
		}
		from, ok := seen[o]
		if !ok {
			from = now // seen now, for the first time
		}
		if at := from.Add(soak); now.Before(at) {
			return o, at
		}
		o++
	}
	return o, time.Time{}
}

// soak is how long a stage soaks before automatic promotion opens the
// next.
func (v *view) soak() time.Duration {
	if v.r.Spec.Promotion.Soak != nil {
		return v.r.Spec.Promotion.Soak.Duration
	}
	return 0
}
