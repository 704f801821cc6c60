package decide

import (
	"time"

	"github.com/kustodian/kustodian/internal/lock"
)

// FarBack reports whether a node waits far back in its queue: Waiting, not
// blocked by a gate of its own, and behind the first near places (NearBand)
// and two per slot, or behind a summary's last name. Such a node renews
// its record every other heartbeat (RecordHeartbeat) and may stop watching
// its group's Leases (Asleep).
func FarBack(near int, d Decision) bool {
	if d.State != lock.Waiting || d.Blocked != "" {
		return false
	}
	return d.BehindCut || d.Position > near+2*max(len(d.Locks), 1)
}

// Moved is how many places a queue moved from one summary to a later one:
// where the later one's first node that the earlier one names stood there,
// less its place in the later one (a node that came in ahead, of a higher
// priority, moves no one forward); -1 when the earlier one names none of
// them (it was short then, or the queue moved past all it named: not a
// measure).
func Moved(before, after []string) int {
	at := make(map[string]int, len(before))
	for i, n := range before {
		at[n] = i
	}
	for j, n := range after {
		if i, ok := at[n]; ok {
			return max(i-j, 0)
		}
	}
	return -1
}

// Sleep limits: a node asleep far back LISTs its group's Leases at least
// every SleepMax heartbeats; it sleeps only while the queue moves at least
// one place in that time (slower, the watch's few events cost less than
// the LISTs), and only while at that pace its turn is more than SleepMargin
// heartbeats away.
const (
	SleepMax    = 6
	SleepMargin = 3
)

// Asleep says whether a node far back may stop watching its group's lock
// and queue Leases, and if so how long until it reads them again (one
// LIST): half the time its queue would take, at pace (places per second,
// as seen between two of its looks), to bring it to the head, between
// SleepMargin/2 and SleepMax heartbeats. Each look halves the time left,
// so a node thousands of places back looks a few times in all, and it
// watches again with SleepMargin heartbeats to spare at that pace.
func Asleep(heartbeat time.Duration, near int, d Decision, pace float64) (time.Duration, bool) {
	if !FarBack(near, d) || d.Ahead <= 0 || pace*SleepMax*heartbeat.Seconds() < 1 {
		return 0, false
	}
	// Its turn comes with a slot free ahead of it: S-1 places before the
	// head.
	ahead := d.Ahead - (max(len(d.Locks), 1) - 1)
	eta := time.Duration(float64(ahead) / pace * float64(time.Second))
	if eta < SleepMargin*heartbeat {
		return 0, false
	}
	return min(eta/2, SleepMax*heartbeat), true
}
