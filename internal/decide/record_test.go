package decide

import (
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/lock"
)

// A record is written when there is none, when a heartbeat is due, and
// when what it says changed; a waiting node's new place alone waits for
// the next heartbeat.
func TestWriteRecord(t *testing.T) {
	hb := 10 * time.Second
	stored := lock.Record{Node: "me", State: lock.Waiting, Message: "waiting: position 2 of 3", Heartbeat: t0}
	with := func(change func(*lock.Record)) lock.Record {
		r := stored
		change(&r)
		return r
	}
	for _, tc := range []struct {
		name   string
		stored *lock.Record
		r      lock.Record
		now    time.Time
		want   bool
	}{
		{"none stored", nil, stored, t0, true},
		{"nothing changed", &stored, stored, t0.Add(5 * time.Second), false},
		{"a heartbeat due", &stored, stored, t0.Add(9 * time.Second), true},
		{"a waiting node's place: with the next heartbeat", &stored, with(func(r *lock.Record) { r.Message = "waiting: position 1 of 2" }), t0.Add(time.Second), false},
		{"a waiting node's gates: with the next heartbeat", &stored, with(func(r *lock.Record) { r.Gates = `[{"gate":"queue"}]` }), t0.Add(time.Second), false},
		{"a new state: at once", &stored, with(func(r *lock.Record) { r.State, r.Message = lock.Draining, "cordoned; draining" }), t0.Add(time.Second), true},
		{"blocked: at once", &stored, with(func(r *lock.Record) { r.Blocked = "held by an admin" }), t0.Add(time.Second), true},
		{"a message in another state: at once", &lock.Record{State: lock.Draining, Message: "cordoned; draining", Heartbeat: t0},
			lock.Record{State: lock.Draining, Message: "cordoned; 3 pods left"}, t0.Add(time.Second), true},
		{"after a failure: at once", &lock.Record{State: lock.Completing, Heartbeat: t0},
			lock.Record{State: lock.Completing, AfterFailure: true}, t0.Add(time.Second), true},
	} {
		if got := WriteRecord(tc.stored, tc.r, tc.now, hb); got != tc.want {
			t.Errorf("%s: WriteRecord = %v, want %v", tc.name, got, tc.want)
		}
	}
}
