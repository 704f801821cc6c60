package agent

import (
	"math"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// RetryBackoff is the wait between failed attempts: from first, doubling up
// to 30 s, each wait longer by up to 20 % at random, so that many agents
// that lost the API server together do not return together. A fresh
// value starts again from first.
func RetryBackoff(first time.Duration) wait.Backoff {
	return wait.Backoff{Duration: first, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: 30 * time.Second}
}
