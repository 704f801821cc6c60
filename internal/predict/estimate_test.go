package predict

import (
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/history"
)

var t0 = time.Date(2026, 11, 28, 22, 0, 0, 0, time.UTC)

// entry is a past maintenance: requested at req, granted at start, ended
// at end (minutes after t0).
func entry(result string, req, start, end float64) history.Entry {
	m := func(f float64) time.Time { return t0.Add(time.Duration(f * float64(time.Minute))) }
	return history.Entry{Requested: m(req), Started: m(start), Drained: m(start), Ended: m(end), Result: result, Policy: "p", Group: ""}
}

func TestEstimate(t *testing.T) {
	h := History{
		Entries: map[string][]history.Entry{
			// Its own: 4, 6 and 20 minutes held (a failure says nothing).
			"a": {entry(history.Succeeded, 0, 0, 4), entry(history.Succeeded, 10, 10, 16), entry(history.Failed, 20, 20, 21), entry(history.Succeeded, 30, 30, 50)},
			// Requested only: never took the lock.
			"b": {{Requested: t0, Ended: t0.Add(time.Minute), Result: history.Succeeded}},
			"c": {entry(history.Succeeded, 0, 5, 7)},
			"x": {entry(history.Succeeded, 0, 0, 100)},
		},
		Policy: map[string]string{"a": "p", "b": "p", "c": "p", "d": "p", "x": "other", "y": "third"},
	}
	cases := []struct {
		node string
		want Estimate
	}{
		{"a", Estimate{6 * time.Minute, SourceNode, 3}},
		// b's own history holds no lock time: its policy's, the median of
		// 4, 6, 20 (a) and 2 (c): (4+6)/2.
		{"b", Estimate{5 * time.Minute, SourcePolicy, 4}},
		{"c", Estimate{2 * time.Minute, SourceNode, 1}},
		{"d", Estimate{5 * time.Minute, SourcePolicy, 4}},
		{"y", Estimate{DefaultDuration, SourceDefault, 0}},
	}
	for _, c := range cases {
		if got := h.Estimate(c.node); got != c.want {
			t.Errorf("Estimate(%s) = %+v, want %+v", c.node, got, c.want)
		}
	}
}

func TestEstimateReadsTheLastFive(t *testing.T) {
	var es []history.Entry
	// Seven maintenances: 100 minutes each, then five of 1 minute.
	for i := range 7 {
		d := 1.0
		if i < 2 {
			d = 100
		}
		at := float64(i * 200)
		es = append(es, entry(history.Succeeded, at, at, at+d))
	}
	got := History{Entries: map[string][]history.Entry{"a": es}}.Estimate("a")
	if got.Duration != time.Minute || got.Samples != 5 {
		t.Errorf("Estimate = %+v, want 1m from 5 samples", got)
	}
}

func TestHandoff(t *testing.T) {
	h := History{Entries: map[string][]history.Entry{
		// a ends at 10; b, waiting since 1, starts at 10.5; c, waiting
		// since 2, starts at 20.25 after b's end at 20.
		"a": {entry(history.Succeeded, 0, 0, 10)},
		"b": {entry(history.Succeeded, 1, 10.5, 20)},
		"c": {entry(history.Succeeded, 2, 20.25, 30)},
		// d was requested after c ended: its wait is not a handoff.
		"d": {entry(history.Succeeded, 35, 35.1, 40)},
		// e waited 10 minutes after d: a gate (spacing, a window), not the
		// handoff.
		"e": {entry(history.Succeeded, 36, 50, 60)},
	}}
	if got, want := h.Handoff(), 22500*time.Millisecond; got != want {
		t.Errorf("Handoff = %v, want %v (the median of 30 s and 15 s)", got, want)
	}
	if got := (History{}).Handoff(); got != 0 {
		t.Errorf("Handoff of no history = %v, want 0", got)
	}
}
