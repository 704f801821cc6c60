// Package timeline records the published states of Kustodian's node records,
// as the API server orders them, for tests, the demo and the benchmarks:
// who was in which state when, whether two nodes were ever in maintenance at
// once, in which order the lock was granted, and how long each step took.
package timeline

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kustodian/kustodian/internal/lock"
)

// Idle stands for a deleted record: the node is back to Idle.
const Idle = lock.Idle

// Transition is one change of a node's published state.
type Transition struct {
	At      time.Time
	Node    string
	State   lock.State
	Message string
	Key     string // the record's queue key
}

// Timeline is the recorded transitions, in the order of the API server.
type Timeline struct {
	mu     sync.Mutex
	events []Transition
	last   map[string]lock.State
	notify func(Transition)
	err    error // the recording broke off: the history is incomplete
}

// Record starts recording the node records of namespace until ctx ends.
// onChange, if not nil, is called for each transition as it happens.
//
// It lists the records, then follows them from that list's resource
// version with a watch that is opened again whenever the API server closes
// it, so no change is missed. If the history cannot be continued (the
// resource version expired, an error event), the timeline says so in Err,
// and every check fails with it: a truncated history must not pass.
func Record(ctx context.Context, client kubernetes.Interface, namespace string, onChange func(Transition)) (*Timeline, error) {
	leases := client.CoordinationV1().Leases(namespace)
	list, err := leases.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing the Leases of %s: %w", namespace, err)
	}
	tl := &Timeline{last: map[string]lock.State{}, notify: onChange}
	for i := range list.Items {
		tl.observe(watch.Added, &list.Items[i])
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return leases.Watch(ctx, o)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("watching the Leases of %s: %w", namespace, err)
	}
	go func() {
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					if ctx.Err() == nil {
						tl.fail(errors.New("the watch of the records ended before the test did"))
					}
					return
				}
				if ev.Type == watch.Error {
					tl.fail(fmt.Errorf("the watch of the records failed: %v", apierrors.FromObject(ev.Object)))
					return
				}
				if l, ok := ev.Object.(*coordv1.Lease); ok {
					tl.observe(ev.Type, l)
				}
			}
		}
	}()
	return tl, nil
}

func (tl *Timeline) observe(typ watch.EventType, l *coordv1.Lease) {
	if !lock.IsRecordName(l.Name) {
		return
	}
	r := lock.RecordFromLease(l)
	t := Transition{At: time.Now(), Node: lock.NodeOfRecord(l.Name), State: r.State, Message: r.Message, Key: r.QueueKey}
	if typ == watch.Deleted {
		t.State, t.Message = Idle, "record deleted: back in the cluster"
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

// Err is why the recording broke off; nil while the history is whole.
func (tl *Timeline) Err() error {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return tl.err
}

func (tl *Timeline) add(t Transition) {
	tl.mu.Lock()
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

// CheckExclusive returns an error if more than slots nodes were ever
// Draining, InMaintenance or Rebooting at once.
func (tl *Timeline) CheckExclusive(slots int) error {
	if err := tl.Err(); err != nil {
		return err
	}
	now := map[string]bool{}
	for _, t := range tl.Transitions() {
		if active(t.State) {
			now[t.Node] = true
		} else {
			delete(now, t.Node)
		}
		if len(now) > slots {
			var nodes []string
			for n := range now {
				nodes = append(nodes, n)
			}
			sort.Strings(nodes)
			return fmt.Errorf("%d nodes active at once (%v) at %s", len(now), nodes, t.At.Format("15:04:05.000"))
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
// by the resource versions at which their first Waiting records reached the
// API server, compared as numbers, then by name. It states the rule itself
// rather than asking the queue code it checks.
func (tl *Timeline) RequestOrder() []string {
	keys := map[string]uint64{}
	for _, t := range tl.Transitions() {
		if _, seen := keys[t.Node]; t.State == lock.Waiting && !seen {
			k, err := strconv.ParseUint(t.Key, 10, 64)
			if err != nil {
				k = math.MaxUint64 // an unreadable key goes last, and the order check says so
			}
			keys[t.Node] = k
		}
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
