// Package timeline records the published states of Kustodian's node records,
// as the API server orders them, for tests, the demo and the benchmarks:
// who was in which state when, whether more nodes of a group than it has
// slots were ever active at once, in which order the lock was granted and
// the requests reached the API server, and how long each step took.
//
// It reads the records by the names and annotations of the contract
// (docs/design.md, "Cluster objects"), written out here, not through the
// code that writes them, and orders requests by the resource versions at
// which the API server created their records.
package timeline

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/follow"
)

// The contract's names: a record is the Lease node-<node>, its state,
// message, policy and group are annotations.
const (
	recordPrefix = "node-"
	annState     = "kustodian.io/state"
	annMessage   = "kustodian.io/message"
	annPolicy    = "kustodian.io/policy"
	annGroup     = "kustodian.io/group"
)

// Idle stands for a deleted record: the node is back to Idle. The states
// are lock.State values, the contract's names.
const Idle = lock.Idle

// Transition is one change of a node's published state.
type Transition struct {
	At      time.Time
	Node    string
	State   lock.State
	Message string
	// Group is the record's "<policy>/<group>" ("default" for the
	// built-in policy, "<policy>" for a policy without groups).
	Group string
	// Created is the resource version at which the API server created the
	// record ("" when it existed before the recording started).
	Created string
}

// Timeline is the recorded transitions, in the order of the API server.
type Timeline struct {
	mu      sync.Mutex
	events  []Transition
	last    map[string]lock.State
	created map[string]string // node → the resource version of its record's creation
	notify  func(Transition)
	err     error    // the recording broke off: the history is incomplete
	gaps    []string // where the API server lost the history and it was listed again
}

// Record starts recording the node records of namespace until ctx ends.
// onChange, if not nil, is called for each transition as it happens.
//
// It lists the records, then follows them from that list's resource
// version with a watch that is opened again whenever the API server closes
// it; when the server no longer has the history (410 Gone, after a restart
// of an API server with a watch cache) it lists again and notes the gap
// (Gaps). Any other break (an error event) is kept in Err, and every check
// fails with it: a truncated history must not pass.
func Record(ctx context.Context, client kubernetes.Interface, namespace string, onChange func(Transition)) (*Timeline, error) {
	leases := client.CoordinationV1().Leases(namespace)
	tl := &Timeline{last: map[string]lock.State{}, created: map[string]string{}, notify: onChange}
	err := follow.Start(ctx, follow.Source{
		What: "the Leases of " + namespace,
		List: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return leases.List(ctx, o) },
		Watch: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return leases.Watch(ctx, o)
		},
	}, follow.Handlers{
		Observe: func(ev follow.Event) {
			if l, ok := ev.Object.(*coordv1.Lease); ok {
				tl.observe(ev.Type, l, ev.Listed)
			}
		},
		Gap: func(from, to string) {
			tl.mu.Lock()
			defer tl.mu.Unlock()
			tl.gaps = append(tl.gaps, fmt.Sprintf("%s: the history after resource version %s was lost; listed again at %s", time.Now().Format("15:04:05.000"), from, to))
		},
		Fail: tl.fail,
	})
	if err != nil {
		return nil, err
	}
	return tl, nil
}

func groupOf(l *coordv1.Lease) string {
	p, g := l.Annotations[annPolicy], l.Annotations[annGroup]
	if p == "" {
		p = "default"
	}
	if g == "" || g == p {
		return p
	}
	return p + "/" + g
}

// observe notes a record's state; listed says it comes from a list, which
// does not show when the record was created.
func (tl *Timeline) observe(typ watch.EventType, l *coordv1.Lease, listed bool) {
	node, ok := strings.CutPrefix(l.Name, recordPrefix)
	if !ok {
		return
	}
	t := Transition{At: time.Now(), Node: node, State: lock.State(l.Annotations[annState]), Message: l.Annotations[annMessage], Group: groupOf(l)}
	switch {
	case typ == watch.Deleted:
		t.State, t.Message = Idle, "record deleted: back in the cluster"
	case typ == watch.Added && !listed:
		t.Created = l.ResourceVersion
	}
	tl.add(t)
}

func (tl *Timeline) fail(err error) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if tl.err == nil {
		tl.err = err
	}
}

// Gaps are where the API server lost the history and the records were
// listed again: changes in a gap are seen as one.
func (tl *Timeline) Gaps() []string {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]string(nil), tl.gaps...)
}

// Err is why the recording broke off; nil while the history is whole.
func (tl *Timeline) Err() error {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.err
}

func (tl *Timeline) add(t Transition) {
	tl.mu.Lock()
	if t.Created != "" {
		tl.created[t.Node] = t.Created
	} else if t.State == Idle {
		delete(tl.created, t.Node)
	}
	changed := tl.last[t.Node] != t.State
	if changed {
		tl.last[t.Node] = t.State
		tl.events = append(tl.events, t)
	}
	tl.mu.Unlock()
	if changed && tl.notify != nil {
		tl.notify(t)
	}
}

// Transitions returns the transitions so far.
func (tl *Timeline) Transitions() []Transition {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return append([]Transition(nil), tl.events...)
}

// State is a node's latest recorded state ("" when never seen).
func (tl *Timeline) State(node string) lock.State {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.last[node]
}

// AllIdle reports whether every given node has been seen and is Idle now.
func (tl *Timeline) AllIdle(nodes []string) error {
	if err := tl.Err(); err != nil {
		return err
	}
	for _, n := range nodes {
		if s := tl.State(n); s != Idle {
			return fmt.Errorf("%s is %s", n, orNone(s))
		}
	}
	return nil
}

func orNone(s lock.State) string {
	if s == "" {
		return "not seen yet"
	}
	return string(s)
}

// Line formats one transition, relative to start when it is not zero.
func Line(t Transition, start time.Time) string {
	at := t.At.Format("15:04:05.000")
	if !start.IsZero() {
		at = fmt.Sprintf("%8.3fs", t.At.Sub(start).Seconds())
	}
	return fmt.Sprintf("%s  %-22s %-14s %s", at, t.Node, t.State, t.Message)
}

func (tl *Timeline) String() string {
	var b strings.Builder
	for _, t := range tl.Transitions() {
		b.WriteString(Line(t, time.Time{}))
		b.WriteByte('\n')
	}
	return b.String()
}

func active(s lock.State) bool {
	return s == lock.Draining || s == lock.InMaintenance || s == lock.Rebooting
}

// CheckExclusive returns an error if more than slots nodes of one group
// were ever Draining, InMaintenance or Rebooting at once.
func (tl *Timeline) CheckExclusive(slots int) error {
	if err := tl.Err(); err != nil {
		return err
	}
	group := map[string]string{}
	now := map[string]bool{}
	for _, t := range tl.Transitions() {
		if active(t.State) {
			now[t.Node], group[t.Node] = true, t.Group
		} else {
			delete(now, t.Node)
		}
		var nodes []string
		for n := range now {
			if group[n] == group[t.Node] {
				nodes = append(nodes, n)
			}
		}
		if len(nodes) > slots {
			sort.Strings(nodes)
			return fmt.Errorf("%d nodes of group %s active at once (%v) at %s", len(nodes), group[t.Node], nodes, t.At.Format("15:04:05.000"))
		}
	}
	return nil
}

// Grants are the nodes in the order they started Draining.
func (tl *Timeline) Grants() []string {
	var out []string
	for _, t := range tl.Transitions() {
		if t.State == lock.Draining {
			out = append(out, t.Node)
		}
	}
	return out
}

// RequestOrder is the order the queue owed the nodes (all at priority 0):
// by the resource versions at which the API server created their records
// (seen in the watch, not read from what the agents wrote), compared as
// numbers, then by name. Nodes whose records existed before the recording
// began, or whose creation was lost in a gap, go last. It states the rule
// itself rather than asking the queue code it checks.
func (tl *Timeline) RequestOrder() []string {
	keys := map[string]uint64{}
	for _, t := range tl.Transitions() {
		if _, seen := keys[t.Node]; seen || t.State == Idle {
			continue
		}
		k, err := strconv.ParseUint(t.Created, 10, 64)
		if err != nil {
			k = math.MaxUint64
		}
		keys[t.Node] = k
	}
	out := make([]string, 0, len(keys))
	for n := range keys {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool {
		if keys[out[i]] != keys[out[j]] {
			return keys[out[i]] < keys[out[j]]
		}
		return out[i] < out[j]
	})
	return out
}

// NodeSummary is what one node's cycle took.
type NodeSummary struct {
	Node        string
	Requested   time.Time // first Waiting
	Granted     time.Time // Draining
	Drained     time.Time // InMaintenance
	Completing  time.Time
	Idle        time.Time
	Drain       time.Duration // Draining to InMaintenance
	Maintenance time.Duration // InMaintenance to Completing
}

// Summary is a whole rollout.
type Summary struct {
	Nodes    []NodeSummary // in grant order
	Makespan time.Duration // first request to last Idle
	// Handoffs are the gaps between one node starting to complete (its
	// script finished) and the next node being granted the lock.
	Handoffs []time.Duration
}

// Summarize computes the summary of complete cycles.
func (tl *Timeline) Summarize() Summary {
	byNode := map[string]*NodeSummary{}
	var order []string
	for _, t := range tl.Transitions() {
		s := byNode[t.Node]
		if s == nil {
			s = &NodeSummary{Node: t.Node}
			byNode[t.Node] = s
		}
		switch t.State {
		case lock.Waiting:
			if s.Requested.IsZero() {
				s.Requested = t.At
			}
		case lock.Draining:
			s.Granted = t.At
			order = append(order, t.Node)
		case lock.InMaintenance:
			s.Drained = t.At
		case lock.Completing:
			s.Completing = t.At
		case Idle:
			s.Idle = t.At
		}
	}
	var sum Summary
	var first, last time.Time
	for _, n := range order {
		s := byNode[n]
		if !s.Drained.IsZero() {
			s.Drain = s.Drained.Sub(s.Granted)
		}
		if !s.Completing.IsZero() && !s.Drained.IsZero() {
			s.Maintenance = s.Completing.Sub(s.Drained)
		}
		sum.Nodes = append(sum.Nodes, *s)
		if !s.Requested.IsZero() && (first.IsZero() || s.Requested.Before(first)) {
			first = s.Requested
		}
		if s.Idle.After(last) {
			last = s.Idle
		}
	}
	if !first.IsZero() && last.After(first) {
		sum.Makespan = last.Sub(first)
	}
	for i := 1; i < len(sum.Nodes); i++ {
		prev, next := sum.Nodes[i-1], sum.Nodes[i]
		if !prev.Completing.IsZero() && next.Granted.After(prev.Completing) {
			sum.Handoffs = append(sum.Handoffs, next.Granted.Sub(prev.Completing))
		}
	}
	return sum
}
