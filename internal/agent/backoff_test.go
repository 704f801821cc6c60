package agent

import (
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
