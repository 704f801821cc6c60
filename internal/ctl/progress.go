package ctl

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/status"
)

// rolloutStart is when the maintenances under way began: the earliest
// request of a node that is neither Idle nor Failed (a failure of last
// week is not this rollout's); now when there is none.
func rolloutStart(s status.MaintenanceStatus) time.Time {
	start := s.Time
	for _, n := range s.Nodes {
		if n.State != lock.Idle && n.State != lock.Failed && n.Requested != nil && n.Requested.Before(start) {
			start = *n.Requested
		}
	}
	return start
}

// barWidth is the progress bar's width in cells.
const barWidth = 24

// fleetProgress is the fleet's progress since `since`: done / in maintenance
// / waiting / failed, the time elapsed and the predicted end. On a
// terminal it starts with a bar; elsewhere it is a plain line with the
// time.
func fleetProgress(s status.MaintenanceStatus, since time.Time, terminal bool) string {
	p := s.ProgressSince(since)
	total := p.Total()
	line := progressWords(s, since)
	if !terminal {
		return s.Time.Format("15:04:05") + "  progress: " + line
	}
	filled := 0
	if total > 0 {
		filled = (p.Done + p.Failed) * barWidth / total
	}
	return "[" + strings.Repeat("#", filled) + strings.Repeat("-", barWidth-filled) + "] " + line
}

// progressWords are the fleet's progress since `since` in words: done, in
// maintenance, waiting, failed, the time elapsed and the predicted end.
func progressWords(s status.MaintenanceStatus, since time.Time) string {
	p := s.ProgressSince(since)
	counts := fmt.Sprintf("%d/%d done, %d in maintenance, %d waiting, %d failed", p.Done, p.Total(), p.InMaintenance, p.Waiting, p.Failed)
	return fmt.Sprintf("%s; elapsed %s; %s", counts, duration.HumanDuration(s.Time.Sub(since)), etaOf(s, p))
}

// etaOf is the fleet's predicted end: "ETA 14:32 UTC (in 9m)".
func etaOf(s status.MaintenanceStatus, p status.Progress) string {
	if p.InMaintenance+p.Waiting == 0 {
		return "nothing left"
	}
	if s.Paused {
		return "no ETA: maintenance is paused"
	}
	f := s.Forecast()
	if f.Err != nil {
		return "ETA unknown: the policies cannot be read"
	}
	var notPlaced []string
	for _, name := range f.Order {
		if f.Nodes[name].Unplaced != "" {
			notPlaced = append(notPlaced, name)
		}
	}
	running := false // a placed node that has not ended
	for _, e := range f.Schedule.Entries {
		running = running || (!e.Stuck && e.End.After(s.Time))
	}
	if !running {
		if len(notPlaced) > 0 {
			return fmt.Sprintf("no ETA: %s cannot be placed (status NODE says why)", shortList(notPlaced, 3))
		}
		return "no ETA: the nodes left are failed or overdue"
	}
	eta := fmt.Sprintf("ETA %s UTC (in %s)", f.Schedule.End.UTC().Format("15:04:05"), duration.HumanDuration(max(f.Schedule.End.Sub(s.Time), time.Second)))
	var overdue []string
	for _, e := range f.Schedule.Entries {
		if e.Overdue {
			overdue = append(overdue, e.Node)
		}
	}
	if len(overdue) > 0 {
		eta = fmt.Sprintf("ETA %s UTC at the earliest (%s overdue)", f.Schedule.End.UTC().Format("15:04:05"), shortList(overdue, 3))
	}
	if len(notPlaced) > 0 {
		eta += fmt.Sprintf(", without %s (not placed: status NODE says why)", shortList(notPlaced, 3))
	}
	return eta
}
