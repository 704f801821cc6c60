package status

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kustodian/kustodian/internal/history"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/policy"
	"github.com/kustodian/kustodian/internal/predict"
)

// Forecast is the predicted course of the maintenances under way, the
// queue, and the nodes a plan adds to it.
type Forecast struct {
	Schedule predict.Schedule
	// Nodes are what the forecast knows of each node it covers, placed or
	// not.
	Nodes map[string]ForecastNode
	// Order is every node covered: in maintenance, the queue in grant
	// order, then the nodes added, then those it could not place.
	Order []string
	// Fits says, per policy with windows, whether the schedule ends in the
	// window it starts in.
	Fits map[string]predict.Fit
	// Handoff is the queue's latency the schedule assumed.
	Handoff time.Duration
	// Err says why there is no forecast: the policies could not be read.
	Err error
}

// ForecastNode is one node of a forecast.
type ForecastNode struct {
	Policy string
	Group  lock.GroupRef
	// State is the node's state now (Idle for a node a plan adds).
	State lock.State
	// Gates are the gates that hold it now, and when each opens.
	Gates []PlannedGate
	// Unplaced says why it is not in the schedule: a gate of its own whose
	// opening nobody can tell (a hold, blocking pods, a silent agent).
	Unplaced string
	// Entry is its place in the schedule (when Unplaced is "").
	Entry predict.Entry
}

// PlannedGate is a gate that holds a node now.
type PlannedGate struct {
	Gate   string     `json:"gate"`
	Reason string     `json:"reason"`
	Opens  *time.Time `json:"opens,omitempty"` // nil: not before someone acts
	// Seen: as the node's agent last saw it (the gates only an agent
	// checks: blockers, health, Prometheus, Alertmanager).
	Seen bool `json:"seen,omitempty"`
}

// ForecastOf predicts the maintenances from in (and s, its status): the
// nodes in maintenance, the queue, and add, nodes that are not waiting
// yet, appended to their group's queue in the order given. Estimates
// come from each node's history; start is when the rollout may begin
// (zero: in.Now).
func ForecastOf(in Inputs, s MaintenanceStatus, add []string, start time.Time) Forecast {
	if in.PoliciesErr != nil {
		return Forecast{Nodes: map[string]ForecastNode{}, Fits: map[string]predict.Fit{}, Err: in.PoliciesErr}
	}
	now := in.Now
	if start.IsZero() || start.Before(now) {
		start = now
	}
	// Each node's policy by its labels, once.
	nodes := map[string]*corev1.Node{}
	resolved := map[string]policy.Effective{}
	hist := predict.History{Entries: nodeHistories(in.Nodes), Policy: map[string]string{}}
	for i := range in.Nodes {
		n := &in.Nodes[i]
		nodes[n.Name] = n
		resolved[n.Name] = policy.Resolve(in.Policies, n.Labels)
		hist.Policy[n.Name] = resolved[n.Name].Name
	}
	effective := func(node string) policy.Effective {
		if eff, ok := resolved[node]; ok {
			return eff
		}
		return policy.Default()
	}
	locks := map[string]lock.Lock{}
	acquired := map[string]time.Time{} // when each lock's holder took it
	records := map[string]lock.Record{}
	newer := map[string]string{} // node → why its record is not read
	for i := range in.Leases {
		l := &in.Leases[i]
		switch {
		case lock.IsLockName(l.Name):
			locks[l.Name] = lock.LockOf(l)
			if l.Spec.AcquireTime != nil {
				acquired[l.Name] = l.Spec.AcquireTime.Time
			}
		case lock.IsRecordName(l.Name):
			r := lock.RecordFromLease(l)
			records[r.Node] = r
			if lock.CheckFormat(l) != nil {
				newer[r.Node] = fmt.Sprintf("its record is in format %q, which this kustodian-ctl does not read: upgrade it", l.Annotations[lock.AnnotationFormat])
			}
		}
	}

	f := Forecast{Nodes: map[string]ForecastNode{}, Fits: map[string]predict.Fit{}, Handoff: hist.Handoff()}
	groups := map[lock.GroupRef]*predict.Group{}
	var groupOrder []lock.GroupRef
	// A group's slots, spacing and windows are its policy's, by name: a
	// record may name the group it joined before the node's labels or the
	// policies changed.
	policyNamed := func(name string) policy.Effective {
		for _, p := range in.Policies {
			if p.Name == name {
				sched, _ := policy.ParseSchedule(p.Spec.Windows, p.Spec.ExcludeDates) // invalid: the agents hold its nodes
				return policy.Effective{Name: name, Spec: p.Spec, Schedule: sched}
			}
		}
		return policy.Default()
	}
	groupOf := func(g lock.GroupRef) *predict.Group {
		if gs := groups[g]; gs != nil {
			return gs
		}
		eff := policyNamed(g.Policy)
		names := g.LockNames(eff.Spec.Slots())
		gs := &predict.Group{Name: g.String(), Slots: eff.Spec.Slots(), Locks: names, Spacing: eff.Spec.SpacingDuration()}
		for _, name := range names {
			if t := locks[name].ReleasedAt; t.After(gs.LastRelease) && !t.After(now.Add(time.Minute)) {
				gs.LastRelease = t
			}
		}
		if len(eff.Spec.Windows) > 0 {
			sched := eff.Schedule
			gs.Window = func(t time.Time) (bool, time.Time) {
				v := sched.At(t)
				return v.Open, v.Change
			}
		}
		groups[g] = gs
		groupOrder = append(groupOrder, g)
		return gs
	}
	covered := func(node string, fn ForecastNode) {
		if _, ok := f.Nodes[node]; !ok {
			f.Order = append(f.Order, node)
		}
		f.Nodes[node] = fn
	}

	// In maintenance: the holders of the locks, on the slot they hold.
	var lockNames []string
	for name := range locks {
		lockNames = append(lockNames, name)
	}
	sort.Strings(lockNames)
	for _, name := range lockNames {
		l := locks[name]
		if l.Holder == "" {
			continue
		}
		if _, done := f.Nodes[l.Holder]; done {
			continue // a second lock of the same holder
		}
		eff := effective(l.Holder)
		g := lock.GroupRef{Policy: eff.Name, Group: eff.Group}
		r, hasRecord := records[l.Holder]
		if hasRecord && r.Policy != "" {
			g = r.GroupRef()
		} else if lg, ok := groupOfLock(l); ok {
			g = lg
		}
		gs := groupOf(g)
		started, ok := acquired[name]
		if !ok {
			started = l.Renewed
		}
		state := lock.State("HoldsLock")
		if hasRecord {
			state = r.State
		}
		// A failed node keeps its lock until an admin releases it.
		gs.Busy = append(gs.Busy, predict.Busy{Node: l.Holder, Started: started, Slot: slices.Index(gs.Locks, name),
			Lock: name, Stuck: state == lock.Failed})
		covered(l.Holder, ForecastNode{Policy: g.Policy, Group: g, State: state})
	}

	// The queue in grant order; waiting nodes passed by the queue are not
	// placed.
	for _, n := range s.Queue() {
		if _, done := f.Nodes[n.Name]; done {
			continue
		}
		r := records[n.Name]
		eff := effective(n.Name)
		g := r.GroupRef()
		if g.Policy == "" {
			g = lock.GroupRef{Policy: eff.Name, Group: eff.Group}
		}
		fn := ForecastNode{Policy: g.Policy, Group: g, State: lock.Waiting}
		fn.Gates = append(fn.Gates, seenGates(r.Gates)...)
		switch {
		case newer[n.Name] != "":
			fn.Unplaced = newer[n.Name]
		case n.Blocked != "":
			fn.Unplaced = "its own gate is closed: " + n.Blocked
		case !n.Live:
			fn.Unplaced = "its agent is silent: the queue passes it"
		case eff.Err != nil:
			fn.Unplaced = eff.Err.Error()
		case n.QueuePosition == 0:
			fn.Unplaced = "its place in the queue is not known"
		}
		if fn.Unplaced == "" {
			gs := groupOf(g)
			gs.Queue = append(gs.Queue, n.Name)
		}
		covered(n.Name, fn)
	}

	// The nodes added, at the end of their groups' queues.
	var added []string
	for _, name := range add {
		if _, done := f.Nodes[name]; done {
			continue
		}
		eff := effective(name)
		g := lock.GroupRef{Policy: eff.Name, Group: eff.Group}
		fn := ForecastNode{Policy: eff.Name, Group: g, State: lock.Idle}
		if r, ok := records[name]; ok && r.State != "" {
			fn.State = r.State
		}
		node := nodes[name]
		switch {
		case node == nil:
			fn.Unplaced = "no such Node"
		case newer[name] != "":
			fn.Unplaced = newer[name]
		case eff.Err != nil:
			fn.Unplaced = eff.Err.Error()
		case node.Annotations[lock.AnnotationHold] != "":
			reason := node.Annotations[lock.AnnotationHold]
			if reason == "true" {
				reason = "held"
			}
			fn.Gates = append(fn.Gates, PlannedGate{Gate: "hold", Reason: reason + " (kustodian-ctl resume " + name + ")"})
			fn.Unplaced = "held: " + reason
		case fn.State != lock.Idle:
			fn.Unplaced = fmt.Sprintf("%s: not waiting for the lock", fn.State)
		default:
			gs := groupOf(g)
			gs.Queue = append(gs.Queue, name)
			added = append(added, name)
		}
		covered(name, fn)
	}

	var pg []predict.Group
	for _, g := range groupOrder {
		pg = append(pg, *groups[g])
	}
	// A later start holds the nodes added; those queued go as they would.
	notBefore := map[string]time.Time{}
	if start.After(now) {
		for _, name := range added {
			notBefore[name] = start
		}
	}
	f.Schedule = predict.Make(predict.Input{Now: now, Start: start, Groups: pg, Estimate: hist.Estimate, Handoff: f.Handoff, NotBefore: notBefore})
	byName := map[string]predict.Group{}
	for _, g := range pg {
		byName[g.Name] = g
	}
	for _, e := range f.Schedule.Entries {
		fn := f.Nodes[e.Node]
		fn.Entry = e
		if !e.InMaintenance {
			fn.Gates = append(groupGates(byName[e.Group], start), fn.Gates...)
			if s.Paused {
				fn.Gates = append([]PlannedGate{{Gate: "paused", Reason: orNone(s.PausedReason) + "; kustodian-ctl resume"}}, fn.Gates...)
			}
		}
		f.Nodes[e.Node] = fn
	}
	for _, u := range f.Schedule.Unplaced {
		fn := f.Nodes[u.Node]
		fn.Unplaced = u.Why
		f.Nodes[u.Node] = fn
	}
	for _, g := range groupOrder {
		gs := groups[g]
		if gs.Window == nil {
			continue
		}
		if _, done := f.Fits[g.Policy]; done {
			continue
		}
		// The policy's own nodes against its window.
		mine := predict.Schedule{Start: f.Schedule.Start}
		for _, e := range f.Schedule.Entries {
			if f.Nodes[e.Node].Policy == g.Policy {
				mine.Entries = append(mine.Entries, e)
			}
		}
		f.Fits[g.Policy] = mine.FitIn(gs.Window)
	}
	// Placed nodes in the order they start; those not placed last.
	pos := map[string]int{}
	for i, e := range f.Schedule.Entries {
		pos[e.Node] = i
	}
	sort.SliceStable(f.Order, func(i, j int) bool {
		pi, oki := pos[f.Order[i]]
		pj, okj := pos[f.Order[j]]
		if oki != okj {
			return oki
		}
		return oki && pi < pj
	})
	return f
}

// groupGates are the gates of a group that hold its nodes at t, with when
// each opens: the window and the spacing.
func groupGates(g predict.Group, t time.Time) []PlannedGate {
	var out []PlannedGate
	if g.Window != nil {
		if open, change := g.Window(t); !open {
			pg := PlannedGate{Gate: "window", Reason: "outside its policy's windows"}
			if !change.IsZero() {
				pg.Opens = &change
			}
			out = append(out, pg)
		}
	}
	if next := g.LastRelease.Add(g.Spacing); g.Spacing > 0 && !g.LastRelease.IsZero() && next.After(t) {
		out = append(out, PlannedGate{Gate: "spacing", Reason: fmt.Sprintf("spacing %s after the group's last release", g.Spacing), Opens: &next})
	}
	return out
}

// seenGates are the closed gates of a waiting node's record that only its
// agent checks (not the window, the spacing, the pause or a hold, which
// the forecast works out itself).
func seenGates(raw string) []PlannedGate {
	if raw == "" {
		return nil
	}
	var gates []Gate
	if json.Unmarshal([]byte(raw), &gates) != nil {
		return nil
	}
	var out []PlannedGate
	for _, g := range gates {
		switch g.Gate {
		case "window", "spacing", "paused", "hold", "queue":
			continue
		}
		if g.Verdict == "closed" {
			out = append(out, PlannedGate{Gate: g.Gate, Reason: g.Reason, Seen: true})
		}
	}
	return out
}

func orNone(s string) string {
	if s == "" {
		return "paused"
	}
	return s
}

// Forecast predicts the maintenances under way and the queue (nothing
// added, starting now); an empty forecast for a status not built by Build.
func (s MaintenanceStatus) Forecast() Forecast {
	if s.inputs == nil {
		return Forecast{Nodes: map[string]ForecastNode{}}
	}
	return ForecastOf(*s.inputs, s, nil, time.Time{})
}

// nodeHistories are the nodes' past maintenances, by node (a history that
// does not parse counts as none: it is a convenience, not a record).
func nodeHistories(nodes []corev1.Node) map[string][]history.Entry {
	out := map[string][]history.Entry{}
	for _, n := range nodes {
		if entries, err := history.Parse(n.Annotations[history.Annotation]); err == nil {
			out[n.Name] = entries
		}
	}
	return out
}
