package agent

import (
	"math/rand/v2"
	"time"
)

// backoff doubles a delay from min up to max, with ±20% jitter so that many
// agents that lost the API server together do not return together.
type backoff struct {
	min, max, next time.Duration
}

func newBackoff(min, max time.Duration) *backoff { return &backoff{min: min, max: max, next: min} }

// Next returns the delay to wait now.
func (b *backoff) Next() time.Duration {
	d := b.next
	b.next = min(b.next*2, b.max)
	jitter := time.Duration((rand.Float64()*0.4 - 0.2) * float64(d))
	return d + jitter
}

// Reset starts again from min.
func (b *backoff) Reset() { b.next = b.min }
