package status

import (
	"time"

	"github.com/kustodian/kustodian/internal/history"
	"github.com/kustodian/kustodian/internal/lock"
)

// Progress counts a fleet's maintenances since a moment: the nodes whose
// maintenance ended since then (by their history) and those under way.
type Progress struct {
	Done, Failed, InMaintenance, Waiting int
}

// Total is every node counted.
func (p Progress) Total() int { return p.Done + p.Failed + p.InMaintenance + p.Waiting }

// ProgressSince counts: Waiting and the states of a maintenance under way
// as they are now; nodes Failed since `since`, and Idle nodes whose last
// maintenance ended since then (done when it succeeded, failed when not).
func (s MaintenanceStatus) ProgressSince(since time.Time) Progress {
	var p Progress
	last := map[string]history.Entry{}
	if s.inputs != nil {
		for node, entries := range nodeHistories(s.inputs.Nodes) {
			if len(entries) > 0 {
				last[node] = entries[len(entries)-1]
			}
		}
	}
	for _, n := range s.Nodes {
		switch n.State {
		case lock.Waiting:
			p.Waiting++
		case lock.Failed:
			if n.Since == nil || !n.Since.Before(since) {
				p.Failed++
			}
		case lock.Idle:
			e, ok := last[n.Name]
			switch {
			case !ok || e.Ended.Before(since):
			case e.Result == history.Succeeded:
				p.Done++
			default:
				p.Failed++
			}
		default:
			p.InMaintenance++
		}
	}
	return p
}
