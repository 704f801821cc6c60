package agent

import (
	"errors"
	"testing"
	"time"
)

// The waits double from the first, stop growing at 30 s, and are never
// shorter than the plain doubling nor longer by more than 20 %.
func TestRetryBackoff(t *testing.T) {
	b := RetryBackoff(time.Second)
	want := time.Second
	for i := range 12 {
		d := b.Step()
		if d < want || d > want+want/5 {
			t.Fatalf("wait %d is %s, want %s to %s", i+1, d, want, want+want/5)
		}
		want = min(2*want, 30*time.Second)
	}
	if fresh := RetryBackoff(time.Second); fresh.Step() > 1200*time.Millisecond {
		t.Error("a fresh backoff does not start again from the first wait")
	}
}

// A wait that keeps failing the same way is said once every 30 s; a new
// error at once.
func TestRepeatLog(t *testing.T) {
	var r RepeatLog
	t0 := time.Unix(1700000000, 0)
	refused, notReady := errors.New("connection refused"), errors.New("not ready")
	for i, tc := range []struct {
		err  error
		at   time.Duration
		want bool
	}{
		{refused, 0, true}, {refused, 2 * time.Second, false}, {refused, 29 * time.Second, false},
		{refused, 30 * time.Second, true}, {notReady, 31 * time.Second, true}, {notReady, 33 * time.Second, false},
		{errors.New("read tcp 10.0.0.5:41234->10.0.0.1:6443: connection reset"), 34 * time.Second, true},
		{errors.New("read tcp 10.0.0.5:41299->10.0.0.1:6443: connection reset"), 36 * time.Second, false},
	} {
		if got := r.Due(tc.err, t0.Add(tc.at)); got != tc.want {
			t.Errorf("%d: %v at %s: Due %v, want %v", i, tc.err, tc.at, got, tc.want)
		}
	}
	b := StartBackoff()
	var longest time.Duration
	for range 20 {
		longest = max(longest, b.Step())
	}
	if longest > 3*time.Second {
		t.Errorf("a starting agent waited %s between attempts, more than 3 s", longest)
	}
}
