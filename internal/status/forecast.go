package status

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

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
	nodes := map[string]int{}
	for i, n := range in.Nodes {
		nodes[n.Name] = i
	}
	effective := func(node string) policy.Effective {
		if i, ok := nodes[node]; ok {
			return policy.Resolve(in.Policies, in.Nodes[i].Labels)
		}
		return policy.Default()
	}
	hist := predict.History{Entries: map[string][]history.Entry{}, Policy: map[string]string{}}
	for _, n := range in.Nodes {
		if entries, err := history.Parse(n.Annotations[history.Annotation]); err == nil {
			hist.Entries[n.Name] = entries
		}
		hist.Policy[n.Name] = policy.Resolve(in.Policies, n.Labels).Name
	}
	locks := map[string]lock.Lock{}
	records := map[string]lock.Record{}
	for i := range in.Leases {
		l := &in.Leases[i]
		switch {
		case lock.IsLockName(l.Name):
			locks[l.Name] = lock.LockOf(l)
		case lock.IsRecordName(l.Name):
			r := lock.RecordFromLease(l)
			records[r.Node] = r
		}
	}

	f := Forecast{Nodes: map[string]ForecastNode{}, Fits: map[string]predict.Fit{}, Handoff: hist.Handoff()}
	type groupState struct {
		group  predict.Group
		policy policy.Effective
	}
	groups := map[lock.GroupRef]*groupState{}
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
	groupOf := func(g lock.GroupRef) *groupState {
		if gs := groups[g]; gs != nil {
			return gs
		}
		eff := policyNamed(g.Policy)
		names := g.LockNames(eff.Spec.Slots())
		gs := &groupState{policy: eff, group: predict.Group{Name: g.String(), Slots: eff.Spec.Slots(), Locks: names,
			Spacing: eff.Spec.SpacingDuration()}}
		for _, name := range names {
			if t := locks[name].ReleasedAt; t.After(gs.group.LastRelease) && !t.After(now.Add(time.Minute)) {
				gs.group.LastRelease = t
			}
		}
		if len(eff.Spec.Windows) > 0 {
			sched := eff.Schedule
			gs.group.Window = func(t time.Time) (bool, time.Time) {
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
		switch {
		case hasRecord && r.Policy != "":
			g = r.GroupRef()
		case l.Grouped:
			g = l.Group
		case strings.HasPrefix(name, "lock-default-"): // before groups were labelled
			g = lock.DefaultGroup
		}
		gs := groupOf(g)
		started := l.Renewed
		for _, sl := range s.Locks {
			if sl.Name == name && sl.Since != nil {
				started = *sl.Since
			}
		}
		state := lock.State("HoldsLock")
		if hasRecord {
			state = r.State
		}
		// A failed node keeps its lock until an admin releases it.
		gs.group.Busy = append(gs.group.Busy, predict.Busy{Node: l.Holder, Started: started, Slot: slices.Index(gs.group.Locks, name),
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
			gs.group.Queue = append(gs.group.Queue, n.Name)
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
		i, known := nodes[name]
		switch {
		case !known:
			fn.Unplaced = "no such Node"
		case eff.Err != nil:
			fn.Unplaced = eff.Err.Error()
		case in.Nodes[i].Annotations[lock.AnnotationHold] != "":
			reason := in.Nodes[i].Annotations[lock.AnnotationHold]
			if reason == "true" {
				reason = "held"
			}
			fn.Gates = append(fn.Gates, PlannedGate{Gate: "hold", Reason: reason + " (kustodian-ctl resume " + name + ")"})
			fn.Unplaced = "held: " + reason
		case fn.State != lock.Idle:
			fn.Unplaced = fmt.Sprintf("%s: not waiting for the lock", fn.State)
		default:
			gs := groupOf(g)
			gs.group.Queue = append(gs.group.Queue, name)
			added = append(added, name)
		}
		covered(name, fn)
	}

	var pg []predict.Group
	for _, g := range groupOrder {
		pg = append(pg, groups[g].group)
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
		if gs.group.Window == nil {
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
		f.Fits[g.Policy] = mine.FitIn(gs.group.Window)
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

// Progress counts a fleet's maintenances since a moment: the nodes whose
// maintenance ended since then (by their history) and those under way.
type Progress struct {
	Done, Failed, InMaintenance, Waiting int
}

// Total is every node counted.
func (p Progress) Total() int { return p.Done + p.Failed + p.InMaintenance + p.Waiting }

// ProgressSince counts: Waiting and the states of a maintenance under way
// as they are now; nodes Failed since `since`, and Idle nodes whose last
// maintenance ended since then (done when it succeeded, failed when not).
func (s MaintenanceStatus) ProgressSince(since time.Time) Progress {
	var p Progress
	last := map[string]history.Entry{}
	if s.inputs != nil {
		for _, n := range s.inputs.Nodes {
			if entries, err := history.Parse(n.Annotations[history.Annotation]); err == nil && len(entries) > 0 {
				last[n.Name] = entries[len(entries)-1]
			}
		}
	}
	for _, n := range s.Nodes {
		switch n.State {
		case lock.Waiting:
			p.Waiting++
		case lock.Failed:
			if n.Since == nil || !n.Since.Before(since) {
				p.Failed++
			}
		case lock.Idle:
			e, ok := last[n.Name]
			switch {
			case !ok || e.Ended.Before(since):
			case e.Result == history.Succeeded:
				p.Done++
			default:
				p.Failed++
			}
		default:
			p.InMaintenance++
		}
	}
	return p
}
