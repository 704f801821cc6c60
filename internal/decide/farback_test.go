package decide

import (
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/lock"
)

func TestMoved(t *testing.T) {
	for _, tc := range []struct {
		before, after []string
		want          int
	}{
		{[]string{"a", "b", "c"}, []string{"c", "d"}, 2},
		{[]string{"a", "b"}, []string{"a", "b"}, 0},
		{[]string{"a", "b", "c"}, []string{"x", "b", "c"}, 0}, // x came in ahead
		{[]string{"a"}, []string{"z"}, -1},                    // the earlier one was short: no measure
		{[]string{"a"}, nil, -1},
	} {
		if got := Moved(tc.before, tc.after); got != tc.want {
			t.Errorf("Moved(%v, %v) = %d, want %d", tc.before, tc.after, got, tc.want)
		}
	}
}

// A node far back sleeps only in a queue that moves at least a place per
// SleepMax heartbeats, only while its turn is SleepMargin heartbeats or
// more away at that pace, and for half of that, at most SleepMax
// heartbeats.
func TestAsleep(t *testing.T) {
	hb := 10 * time.Second
	waiting := func(position int) Decision {
		return Decision{State: lock.Waiting, Position: position, Ahead: position - 1, Locks: []string{"lock-default-0"}}
	}
	for _, tc := range []struct {
		name  string
		d     Decision
		pace  float64
		sleep bool
		after time.Duration
	}{
		{"near the head", waiting(NearBand + 2), 1, false, 0},
		{"pace unknown", waiting(100), 0, false, 0},
		{"a queue slower than a place a minute", waiting(100), 1.0 / 70, false, 0},
		{"far, fast", waiting(101), 0.5, true, SleepMax * hb},
		{"its turn 40 s away", waiting(21), 0.5, true, 20 * time.Second},
		{"its turn 20 s away", waiting(11 + NearBand), 1, false, 0},
		{"blocked", Decision{State: lock.Waiting, Position: 100, Ahead: 99, Blocked: "hold"}, 1, false, 0},
		{"behind a cut summary", Decision{State: lock.Waiting, BehindCut: true, Ahead: 180}, 2, true, 45 * time.Second},
		{"draining", Decision{State: lock.Draining, Position: 100, Ahead: 99}, 1, false, 0},
	} {
		after, sleep := Asleep(hb, NearBand, tc.d, tc.pace)
		if sleep != tc.sleep || after != tc.after {
			t.Errorf("%s: Asleep = %s, %v; want %s, %v", tc.name, after, sleep, tc.after, tc.sleep)
		}
	}
}
