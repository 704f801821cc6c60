package agent

import (
	"fmt"
	"testing"

	"github.com/kustodian/kustodian/internal/lock"
)

// Each transition sets off its Events, notifications and history entries,
// and only those: a repaired failure is no success, a heartbeat is no
// transition.
func TestEffectsOf(t *testing.T) {
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
		for _, e := range effectsOf(tc.from, tc.to, tc.r) {
			switch {
			case e.event != "" && e.warning:
				got = append(got, fmt.Sprintf("warning %s %q", e.event, e.message))
			case e.event != "":
				got = append(got, fmt.Sprintf("event %s %q", e.event, e.message))
			case e.notify != "":
				got = append(got, "notify "+string(e.notify))
			case e.history != "":
				got = append(got, "history "+e.history)
			}
		}
		if s := fmt.Sprint(got); s != tc.want {
			t.Errorf("%s → %s (after failure %v): %s, want %s", tc.from, tc.to, tc.r.AfterFailure, s, tc.want)
		}
	}
}
