// Package history keeps a node's past maintenances.
//
// Records go when their node is back to Idle and Events expire after an
// hour (the API server's --event-ttl), so neither can say what happened
// last week. The agent keeps the last maintenances of its node in an
// annotation on its Node, written once when a maintenance ends: it
// survives agent restarts and reboots, goes with the Node, and is bounded
// (MaxEntries entries and MaxBytes bytes, the oldest dropped first).
// `kustodian-ctl history` reads it.
package history

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/kustodian/kustodian/internal/rollout"
)

// Annotation is the Node annotation that keeps the history.
const Annotation = "kustodian.io/history"

// Bounds of the annotation: entries, and bytes of its value. The
// admission policy holds an agent to MaxBytes.
const (
	MaxEntries = 20
	MaxBytes   = 8192
	// MaxMessage bounds an entry's message.
	MaxMessage = 300
)

// Results of a maintenance.
const (
	Succeeded = "succeeded"
	Failed    = "failed"
)

// Entry is one maintenance. Times are in UTC, to the millisecond.
type Entry struct {
	Requested time.Time `json:"requested"`
	// Started is when the node took the lock and began to drain; Drained,
	// when the drain ended (zero when the maintenance ended before).
	Started time.Time `json:"started,omitzero"`
	Drained time.Time `json:"drained,omitzero"`
	Ended   time.Time `json:"ended"`
	Result  string    `json:"result"`
	Reason  string    `json:"reason,omitempty"`  // the request's
	Message string    `json:"message,omitempty"` // why it failed
	Policy  string    `json:"policy,omitempty"`
	Group   string    `json:"group,omitempty"`
	// Escalated are the pods the drain deleted past their
	// PodDisruptionBudget (a policy's spec.drain.escalate).
	Escalated []string `json:"escalated,omitempty"`
	// Packages are what a patch campaign changed ("name from -> to"), the
	// first MaxPackages, then how many more (the rollout's report has
	// them all).
	Packages []string `json:"packages,omitempty"`
}

// MaxPackages bounds the packages an entry lists.
const MaxPackages = 5

// PackageLines are the lines of an entry's Packages for changes.
func PackageLines(changes []rollout.PackageChange) []string {
	var out []string
	for i, c := range changes {
		if i == MaxPackages {
			out = append(out, fmt.Sprintf("and %d more", len(changes)-MaxPackages))
			break
		}
		from := c.From
		if from == "" {
			from = "(new)"
		}
		out = append(out, c.Name+" "+from+" -> "+c.To)
	}
	return out
}

// Wait, Drain and Maintenance are an entry's durations (0 when unknown).
func (e Entry) Wait() time.Duration        { return between(e.Requested, e.Started) }
func (e Entry) Drain() time.Duration       { return between(e.Started, e.Drained) }
func (e Entry) Maintenance() time.Duration { return between(e.Drained, e.Ended) }

func between(a, b time.Time) time.Duration {
	if a.IsZero() || b.IsZero() || b.Before(a) {
		return 0
	}
	return b.Sub(a)
}

// Parse reads the annotation's value; "" is no history.
func Parse(value string) ([]Entry, error) {
	if value == "" {
		return nil, nil
	}
	var out []Entry
	if err := json.Unmarshal([]byte(value), &out); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", Annotation, err)
	}
	return out, nil
}

// Append adds e to the history in value (oldest first) and returns the
// new value, within MaxEntries and MaxBytes. A value that does not parse
// is replaced: the history is a convenience, not a record to defend.
func Append(value string, e Entry) string {
	entries, _ := Parse(value)
	e.Requested, e.Started, e.Drained, e.Ended = utc(e.Requested), utc(e.Started), utc(e.Drained), utc(e.Ended)
	if r := []rune(e.Message); len(r) > MaxMessage {
		e.Message = string(r[:MaxMessage-1]) + "…"
	}
	if r := []rune(e.Reason); len(r) > MaxMessage {
		e.Reason = string(r[:MaxMessage-1]) + "…"
	}
	entries = append(entries, e)
	if len(entries) > MaxEntries {
		entries = entries[len(entries)-MaxEntries:]
	}
	for {
		b, err := json.Marshal(entries)
		if err != nil {
			return "" // not expected: strings and times only
		}
		if len(b) <= MaxBytes || len(entries) == 1 {
			return string(b)
		}
		entries = entries[1:]
	}
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC().Truncate(time.Millisecond)
}
