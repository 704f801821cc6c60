// Package picture draws a maintenance as a timeline: one row per node,
// its predicted bar above its actual one, each phase in its own colour,
// the policy's windows shaded, failures marked, the summary beside. It
// writes one self-contained file, SVG or HTML (no script, font or style
// from elsewhere: readable offline, fit to attach to a change ticket). It
// is a pure function of a Chart; kustodian-ctl makes the Chart from a
// plan, a history or a rollout.
package picture

import (
	"time"
)

// Phase is a part of a node's maintenance, each drawn in its own colour.
type Phase string

// The phases, in the order a maintenance goes through them.
const (
	Waiting     Phase = "waiting"
	Draining    Phase = "draining"
	Maintenance Phase = "maintenance"
	Rebooting   Phase = "rebooting"
	Soak        Phase = "soak"
)

// Phases are every phase, in order (the legend's).
var Phases = []Phase{Waiting, Draining, Maintenance, Rebooting, Soak}

// Span is a phase from one time to another.
type Span struct {
	Phase    Phase
	From, To time.Time
}

// Row is one node: what was predicted, what happened, and what to say of
// it on hover and in the table under the chart.
type Row struct {
	Label     string
	Predicted []Span
	Actual    []Span
	// Failed: its maintenance failed (a mark at the end of its last
	// actual span); Late: it ran past its predicted end; Quarantined: its
	// drain timed out and it is kept out of the queue.
	Failed, Late, Quarantined bool
	// Note is said on hover and in the table: the gates that held it,
	// why it failed.
	Note string
}

// Window is a time the policy lets maintenances start, shaded.
type Window struct {
	From, To time.Time
	Label    string
}

// Chart is what a picture shows.
type Chart struct {
	Title string
	// Now is when it was made: a line, when within the range.
	Now      time.Time
	Rows     []Row
	Windows  []Window
	Deadline *time.Time
	// Summary are lines said above the chart (the makespan predicted and
	// actual, the nodes late, the deadline).
	Summary []string
}

// marks are the words that mark a row, in their order: failed, late,
// quarantined.
func (r Row) marks() []string {
	var out []string
	for _, m := range []struct {
		on   bool
		word string
	}{{r.Failed, "failed"}, {r.Late, "late"}, {r.Quarantined, "quarantined"}} {
		if m.on {
			out = append(out, m.word)
		}
	}
	return out
}

// Range is the time the chart spans: from its first time to its last,
// the now line and the deadline included, ten seconds at least.
func (c Chart) Range() (from, to time.Time) {
	see := func(t time.Time) {
		if t.IsZero() {
			return
		}
		if from.IsZero() || t.Before(from) {
			from = t
		}
		if to.IsZero() || t.After(to) {
			to = t
		}
	}
	for _, r := range c.Rows {
		for _, s := range append(append([]Span(nil), r.Predicted...), r.Actual...) {
			see(s.From)
			see(s.To)
		}
	}
	see(c.Now)
	if c.Deadline != nil {
		see(*c.Deadline)
	}
	if from.IsZero() {
		from = c.Now
	}
	if to.Sub(from) < 10*time.Second {
		to = from.Add(10 * time.Second) // a scale of seconds at least
	}
	return from, to
}

// WindowsOf are the times a schedule is open between from and to: at says
// whether it is open at a time and when that changes next (zero: never).
func WindowsOf(at func(time.Time) (open bool, change time.Time), from, to time.Time, label string) []Window {
	var out []Window
	for t, n := from, 0; t.Before(to) && n < 1000; n++ {
		open, change := at(t)
		if change.IsZero() || change.After(to) {
			change = to
		}
		if open {
			out = append(out, Window{From: t, To: change, Label: label})
		}
		if !change.After(t) {
			break
		}
		t = change
	}
	return out
}
