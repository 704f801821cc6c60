package decide

import (
	"time"

	"github.com/kustodian/kustodian/internal/lock"
)

// WriteRecord says whether the agent writes its record r now: when it has
// none stored, when a heartbeat is due (nine tenths of one since the last),
// or when something worth a write changed. While a node waits, its place
// and the holder it waits for change at every handoff: that text goes out
// with the next heartbeat, not at once, so that a handoff does not make
// every waiting agent write.
func WriteRecord(stored *lock.Record, r lock.Record, now time.Time, heartbeat time.Duration) bool {
	if stored == nil || now.Sub(stored.Heartbeat) >= heartbeat*9/10 {
		return true
	}
	textOnly := r.State == lock.Waiting && stored.State == lock.Waiting && sameRecord(withText(*stored, r), r)
	return !sameRecord(*stored, r) && !textOnly
}

// withText is prev with the text of r: its message and its gates' verdicts.
func withText(prev, r lock.Record) lock.Record {
	prev.Message, prev.Gates = r.Message, r.Gates
	return prev
}

// sameRecord compares what is worth a write.
func sameRecord(a, b lock.Record) bool {
	return a.State == b.State && a.Message == b.Message && a.Reason == b.Reason && a.RequestID == b.RequestID &&
		a.Group == b.Group && a.Priority == b.Priority && a.Blocked == b.Blocked && a.Since.Equal(b.Since) &&
		a.QueueKey == b.QueueKey && a.ReleasedRequest == b.ReleasedRequest && a.Policy == b.Policy &&
		a.Gates == b.Gates && a.BlockedReported == b.BlockedReported && a.AfterFailure == b.AfterFailure && a.ByAdmin == b.ByAdmin &&
		a.Silence == b.Silence
}
