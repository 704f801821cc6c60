package decide

import (
	"fmt"
	"testing"

	"github.com/kustodian/kustodian/internal/lock"
)

// Each transition sets off its Events, notifications and history entries,
// and only those: a repaired failure is no success, a heartbeat is no
// transition.
func TestTransition(t *testing.T) {
	r := lock.Record{Reason: "kernel 6.1", Message: "job apt (run 1): failed, exit 100"}
	repaired := r
	repaired.AfterFailure = true
	for _, tc := range []struct {
		from, to lock.State
		r        lock.Record
		want     string
	}{
		{lock.Idle, lock.Waiting, r, `[event MaintenanceRequested "maintenance requested: kernel 6.1"]`},
		{"", lock.Waiting, r, `[event MaintenanceRequested "maintenance requested: kernel 6.1"]`},
		{lock.Failed, lock.Waiting, r, `[]`},
		{lock.Waiting, lock.Draining, r, `[event LockAcquired "acquired the maintenance lock; cordoning and draining" notify started]`},
		{lock.Rebooting, lock.Draining, r, `[event LockAcquired "acquired the maintenance lock; cordoning and draining"]`},
		{lock.Draining, lock.InMaintenance, r, `[event MaintenanceStarted "the maintenance script may proceed"]`},
		{lock.InMaintenance, lock.Rebooting, r, `[event Rebooting "the host is rebooting; the lock stays held"]`},
		{lock.InMaintenance, lock.Completing, r, `[history succeeded]`},
		{lock.Failed, lock.Completing, r, `[]`},
		{lock.InMaintenance, lock.Failed, r, `[warning MaintenanceFailed "" notify failed history failed]`},
		{lock.Completing, lock.Idle, r, `[event MaintenanceCompleted "maintenance completed; node is back in the cluster" notify completed]`},
		{lock.Completing, lock.Idle, repaired, `[]`},
		{lock.Waiting, lock.Idle, r, `[]`},
	} {
		var got []string
		for _, e := range Transition(tc.from, tc.to, tc.r) {
			switch {
			case e.Event != "" && e.Warning:
				got = append(got, fmt.Sprintf("warning %s %q", e.Event, e.Message))
			case e.Event != "":
				got = append(got, fmt.Sprintf("event %s %q", e.Event, e.Message))
			case e.Notify != "":
				got = append(got, "notify "+e.Notify)
			case e.History != "":
				got = append(got, "history "+e.History)
			}
		}
		if s := fmt.Sprint(got); s != tc.want {
			t.Errorf("%s → %s (after failure %v): %s, want %s", tc.from, tc.to, tc.r.AfterFailure, s, tc.want)
		}
	}
}

// A drain given up for the queue (drain.onTimeout: release) is a
// maintenance that did not happen: said as a failure, with its
// notification and its history entry, as every other.
func TestRequeueIsSaidAsAFailure(t *testing.T) {
	step := DrainNext(DrainFacts{NodeExists: true, Request: "r1", ReleaseOnTimeout: true,
		Drain: &DrainRun{Request: "r1", Done: true, Err: fmt.Errorf("pods would not go"), TimedOut: true}})
	if step.Do != DrainRequeue {
		t.Fatalf("step %v, want DrainRequeue", step.Do)
	}
	var kinds []string
	for _, e := range step.Effects {
		switch {
		case e.Event == ReasonMaintenanceFailed && e.Warning && e.Message == step.Why:
			kinds = append(kinds, "event")
		case e.Notify == NotifyFailed && e.Message == step.Why:
			kinds = append(kinds, "notify")
		case e.History == HistoryFailed:
			kinds = append(kinds, "history")
		}
	}
	if fmt.Sprint(kinds) != "[event notify history]" {
		t.Errorf("effects %+v: want the MaintenanceFailed Event, the failed notification and a failed history entry", step.Effects)
	}
}
