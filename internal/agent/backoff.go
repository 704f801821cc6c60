package agent

import (
	"math"
	"regexp"
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

// StartBackoff is the wait between attempts while an agent starts and the
// API server does not answer yet: from 0.5 s, doubling up to 2 s, plus up
// to half as much at random. A starting agent has nothing else to do, and
// its node may be the next in line: it goes on within about 3 s of the
// API server's return, however long it was away.
func StartBackoff() wait.Backoff {
	return wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: math.MaxInt32, Cap: 2 * time.Second}
}

// RepeatLog says when a wait that keeps failing is worth a log line: when
// its error changes, and every 30 s while it does not.
type RepeatLog struct {
	last string
	at   time.Time
}

// Due reports whether err is worth a log line now. Errors that differ
// only in their numbers (a connection's port) are the same error.
func (r *RepeatLog) Due(err error, now time.Time) bool {
	key := digits.ReplaceAllString(err.Error(), "N")
	if key == r.last && now.Sub(r.at) < 30*time.Second {
		return false
	}
	r.last, r.at = key, now
	return true
}

var digits = regexp.MustCompile(`[0-9]+`)
