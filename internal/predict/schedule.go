package predict

import (
	"sort"
	"strings"
	"time"
)

// Window says whether grants may start at a moment, and when that changes
// next (zero: never). policy.Schedule answers it for a policy's windows.
type Window func(t time.Time) (open bool, change time.Time)

// Group is one group of a policy as the schedule needs it: its slots, the
// nodes in maintenance now, the queue in grant order, and its gates.
type Group struct {
	Name  string
	Slots int
	// Locks name the slots, in order (for the plan's SLOT); may be empty.
	Locks []string
	// Busy are the nodes that hold a slot now.
	Busy []Busy
	// Queue are the nodes that will ask, in grant order.
	Queue []string
	// Spacing is the policy's time from a release to the next grant, and
	// LastRelease the group's latest release so far.
	Spacing     time.Duration
	LastRelease time.Time
	// Window is nil for always.
	Window Window
}

// Busy is a node in maintenance: since when it holds its slot, and which.
// A Stuck one keeps it until someone acts (its maintenance failed: it
// holds its lock until an admin releases it).
type Busy struct {
	Node    string
	Started time.Time
	Slot    int    // its lock's slot; -1 for a lock beyond the group's slots
	Lock    string // the lock it holds ("": Group.Locks names it by Slot)
	Stuck   bool
}

// Input is what a schedule is made from.
type Input struct {
	// Now is the present: slots free from then on. Start is where the
	// schedule's makespan counts from (zero: Now).
	Now, Start time.Time
	Groups     []Group
	// Estimate is each node's lock-holding time.
	Estimate func(node string) Estimate
	// Handoff is added between a release and the grant that follows it.
	Handoff time.Duration
	// NotBefore is when a node may start at the earliest: a plan's start
	// for the nodes it adds (the nodes queued already go as they would).
	NotBefore map[string]time.Time
}

// Entry is one node's predicted maintenance.
type Entry struct {
	Node, Group string
	Slot        int
	Lock        string
	Start, End  time.Time
	Estimate    Estimate
	// InMaintenance: it held its slot already. Overdue: it has held it
	// longer than its estimate; its End is then Now, as far as anyone can
	// tell. Stuck: it keeps its slot until someone acts (End is zero).
	InMaintenance, Overdue, Stuck bool
	// Later: its times are the earliest it can go, not a prediction: a
	// node before it in its group is overdue.
	Later bool
	// Deferred is why it starts later than its slot frees: "window",
	// "spacing" or "start" (NotBefore); "" when it does not wait.
	Deferred string
}

// Unplaced is a node the schedule could not place, and why.
type Unplaced struct {
	Node, Why string
}

// Schedule is the predicted rollout.
type Schedule struct {
	Start, End time.Time
	Entries    []Entry // by start, then group, then queue order
	Unplaced   []Unplaced
}

// Makespan is the time from the rollout's start to its last end.
func (s Schedule) Makespan() time.Duration {
	if s.End.Before(s.Start) {
		return 0
	}
	return s.End.Sub(s.Start)
}

// horizon bounds how far ahead a window's opening is followed.
const horizon = 400 * 24 * time.Hour

// Make predicts, group by group, when each node takes a slot and gives it
// back: the slot that frees first goes to the next node of the queue, after
// the handoff, no sooner than the spacing after the group's last release,
// the node's NotBefore, and the next opening of the window (a window decides
// when grants start; a maintenance that started runs to its end). A
// group's slots are its policy's: a node that holds a slot beyond them
// (concurrency lowered since) still keeps one of them busy.
func Make(in Input) Schedule {
	start := in.Start
	if start.Before(in.Now) {
		start = in.Now
	}
	out := Schedule{Start: start, End: start}
	for _, g := range in.Groups {
		slots := max(g.Slots, 1)
		free := make([]time.Time, slots) // when each slot frees
		released := make([]bool, slots)  // freed by a release: a handoff follows
		stuck := make([]string, slots)   // the holder that keeps it
		for i := range free {
			free[i] = in.Now
		}
		releases := []time.Time{g.LastRelease}
		later := false
		for _, b := range g.Busy {
			e := in.Estimate(b.Node)
			end := b.Started.Add(e.Duration)
			overdue := !b.Stuck && !end.After(in.Now)
			if overdue {
				end, later = in.Now, true
			}
			// Its own slot; else (a lock beyond the slots, concurrency
			// lowered since) the one that frees first: the agents count
			// such a holder against the free locks until it releases.
			slot := b.Slot
			if slot < 0 || slot >= slots || released[slot] || stuck[slot] != "" {
				if slot = earliestSlot(free, stuck); slot < 0 {
					slot = 0
				}
			}
			name := b.Lock
			if name == "" {
				name = lockName(g, slot)
			}
			entry := Entry{Node: b.Node, Group: g.Name, Slot: slot, Lock: name, Start: b.Started, End: end,
				Estimate: e, InMaintenance: true, Overdue: overdue, Stuck: b.Stuck}
			switch {
			case b.Stuck:
				stuck[slot], entry.End = b.Node, time.Time{}
			case !released[slot] || end.After(free[slot]):
				free[slot], released[slot] = end, true
				releases = append(releases, end)
			}
			out.add(entry)
		}
		for _, node := range g.Queue {
			slot := earliestSlot(free, stuck)
			if slot < 0 {
				out.Unplaced = append(out.Unplaced, Unplaced{node, "every slot of its group is held by a node whose maintenance failed (" +
					joinNonEmpty(stuck) + "): kustodian-ctl release NODE"})
				continue
			}
			at, deferred := free[slot], ""
			if released[slot] {
				at = at.Add(in.Handoff)
			}
			// Each gate may push the start past another's edge: again until
			// none moves it.
			placed := true
			for moved := true; moved; {
				moved = false
				if last := latest(releases, at); g.Spacing > 0 && !last.IsZero() && at.Before(last.Add(g.Spacing)) {
					at, deferred, moved = last.Add(g.Spacing), "spacing", true
				}
				if nb, ok := in.NotBefore[node]; ok && at.Before(nb) {
					at, deferred, moved = nb, "start", true
				}
				if g.Window != nil {
					opens, ok := nextOpen(g.Window, at)
					if !ok {
						placed = false
						break
					}
					if opens.After(at) {
						at, deferred, moved = opens, "window", true
					}
				}
			}
			if !placed {
				out.Unplaced = append(out.Unplaced, Unplaced{node, "its policy's windows open nowhere in the next year"})
				continue
			}
			e := in.Estimate(node)
			end := at.Add(e.Duration)
			free[slot], released[slot] = end, true
			releases = append(releases, end)
			out.add(Entry{Node: node, Group: g.Name, Slot: slot, Lock: lockName(g, slot), Start: at, End: end, Estimate: e, Deferred: deferred, Later: later})
		}
	}
	sort.SliceStable(out.Entries, func(i, j int) bool { return out.Entries[i].Start.Before(out.Entries[j].Start) })
	return out
}

func joinNonEmpty(ss []string) string {
	var out []string
	for _, s := range ss {
		if s != "" {
			out = append(out, s)
		}
	}
	return strings.Join(out, ", ")
}

func (s *Schedule) add(e Entry) {
	s.Entries = append(s.Entries, e)
	if !e.Stuck && e.End.After(s.End) {
		s.End = e.End
	}
}

func lockName(g Group, slot int) string {
	if slot < len(g.Locks) {
		return g.Locks[slot]
	}
	return ""
}

// latest is the latest of the times at or before t.
func latest(times []time.Time, t time.Time) time.Time {
	var out time.Time
	for _, r := range times {
		if !r.After(t) && r.After(out) {
			out = r
		}
	}
	return out
}

// earliestSlot is the slot that frees first, of those no stuck node
// keeps; -1 when there is none.
func earliestSlot(free []time.Time, stuck []string) int {
	best := -1
	for i, t := range free {
		if stuck[i] == "" && (best < 0 || t.Before(free[best])) {
			best = i
		}
	}
	return best
}

// nextOpen is the first moment from t on at which the window is open.
func nextOpen(w Window, t time.Time) (time.Time, bool) {
	for at := t; at.Sub(t) < horizon; {
		open, change := w(at)
		if open {
			return at, true
		}
		if !change.After(at) {
			return time.Time{}, false
		}
		at = change
	}
	return time.Time{}, false
}

// Fit says whether a schedule ends inside the window it starts in.
type Fit struct {
	// Closes is when the window open at the rollout's start (or the first
	// that opens after it) closes; zero when there is no window (always).
	Closes time.Time
	Fits   bool
	// FirstLate is the first node, by start, whose end passes Closes, and
	// Over by how much.
	FirstLate string
	Over      time.Duration
	// Late counts the nodes that end after Closes.
	Late int
}

// FitIn checks the schedule against a window.
func (s Schedule) FitIn(w Window) Fit {
	if w == nil {
		return Fit{Fits: true}
	}
	opens, ok := nextOpen(w, s.Start)
	if !ok {
		return Fit{}
	}
	_, closes := w(opens)
	f := Fit{Closes: closes, Fits: true}
	if closes.IsZero() {
		return f
	}
	for _, e := range s.Entries {
		if e.Stuck || !e.End.After(closes) {
			continue
		}
		f.Late++
		if f.Fits {
			f.Fits, f.FirstLate, f.Over = false, e.Node, e.End.Sub(closes)
		}
	}
	return f
}
