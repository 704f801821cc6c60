package decide

import (
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/hostfiles"
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

// A waiting node far back in its queue renews its record every other
// heartbeat; the heads, the next in line and every node in another state
// at every heartbeat.
func TestRecordHeartbeat(t *testing.T) {
	hb := 10 * time.Second
	one := []string{"lock-default-0"}
	for _, tc := range []struct {
		name string
		d    Decision
		want time.Duration
	}{
		{"the head", Decision{State: lock.Waiting, Locks: one, Position: 1}, hb},
		{"the last of the near band", Decision{State: lock.Waiting, Locks: one, Position: NearBand + 2}, hb},
		{"just behind it", Decision{State: lock.Waiting, Locks: one, Position: NearBand + 3}, 2 * hb},
		{"far back", Decision{State: lock.Waiting, Locks: one, Position: 4000}, 2 * hb},
		{"behind a summary's last name", Decision{State: lock.Waiting, Locks: one, BehindCut: true}, 2 * hb},
		{"place not known yet", Decision{State: lock.Waiting, Locks: one}, hb},
		{"three slots widen the band", Decision{State: lock.Waiting, Locks: []string{"a", "b", "c"}, Position: NearBand + 6}, hb},
		{"blocked by its own gate", Decision{State: lock.Waiting, Locks: one, Position: 4000, Blocked: "held"}, hb},
		{"draining", Decision{State: lock.Draining, Locks: one, Position: 4000}, hb},
	} {
		if got := RecordHeartbeat(hb, NearBand, tc.d); got != tc.want {
			t.Errorf("%s: RecordHeartbeat = %s, want %s", tc.name, got, tc.want)
		}
	}
}

// A node's next record: what it keeps of the one stored, and what is new.
func TestNextRecord(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	now := t0.Add(90 * time.Minute).Add(300 * time.Millisecond)
	req := &hostfiles.Request{ID: "r1", Reason: "kernel"}
	in := func(state lock.State, mod ...func(*RecordIn)) RecordIn {
		i := RecordIn{Node: "n1", State: state, Message: "m", Group: lock.GroupRef{Policy: "p", Group: "a"}, Request: req,
			Silence: "abc until 11:00", Now: now}
		for _, m := range mod {
			m(&i)
		}
		return i
	}
	waiting := lock.Record{Node: "n1", State: lock.Waiting, Since: t0, Requested: t0, QueueKey: "42", RequestID: "r1", Reason: "kernel", BlockedReported: true}

	r, from := NextRecord(nil, in(lock.Waiting))
	if from != "" || !r.Since.Equal(now.Truncate(time.Second)) || !r.Requested.Equal(now) || r.Reason != "kernel" || r.RequestID != "r1" || r.Policy != "p" || r.Group != "a" {
		t.Errorf("a first record: %+v from %q", r, from)
	}
	r, from = NextRecord(&waiting, in(lock.Waiting, func(i *RecordIn) {
		i.Decision = Decision{Blocked: "pods", Gates: []GateVerdict{{Gate: GatePods, Verdict: Closed}}}
	}))
	if from != lock.Waiting || !r.Since.Equal(t0) || !r.Requested.Equal(t0) || r.QueueKey != "42" || r.Blocked != "pods" || !r.BlockedReported ||
		r.Gates != `[{"gate":"pods","verdict":"closed"}]` || r.Silence != "abc until 11:00" {
		t.Errorf("still waiting: %+v from %q", r, from)
	}
	r, _ = NextRecord(&waiting, in(lock.Draining))
	if !r.Since.Equal(now.Truncate(time.Second)) || r.Blocked != "" || r.Gates != "" || r.BlockedReported || r.Silence == "" {
		t.Errorf("draining: %+v", r)
	}
	r, _ = NextRecord(&waiting, in(lock.Idle))
	if r.Silence != "" {
		t.Errorf("idle keeps no silence: %+v", r)
	}
	failed := waiting
	failed.State, failed.Message = lock.Failed, "job failed"
	r, _ = NextRecord(&failed, in(lock.Completing, func(i *RecordIn) { i.Request = nil }))
	if r.Reason != "kernel" || r.RequestID != "" || !r.AfterFailure {
		t.Errorf("completing after a failure, the request removed: %+v", r)
	}
	byAdmin := failed
	byAdmin.ByAdmin = true
	if _, from := NextRecord(&byAdmin, in(lock.Failed)); from != "" {
		t.Errorf("after an admin's release the way into Failed is from %q, want none", from)
	}
	if _, from := NextRecord(&failed, in(lock.Failed)); from != lock.Failed {
		t.Errorf("failed again: from %q", from)
	}
	r, _ = NextRecord(&waiting, in(lock.Failed, func(i *RecordIn) { i.Quarantined = "r1" }))
	if r.ReleasedRequest != "r1" {
		t.Errorf("quarantined for r1: %+v", r)
	}
	r, _ = NextRecord(&waiting, in(lock.Failed, func(i *RecordIn) { i.Quarantined = "r0" }))
	if r.ReleasedRequest != "" {
		t.Errorf("quarantined for an older request: %+v", r)
	}
}

// The message of a maintenance that ends says how it ended.
func TestEndingMessages(t *testing.T) {
	req := &hostfiles.Request{ID: "r1"}
	failed := lock.Record{State: lock.Failed, Message: "quarantined: the drain timed out"}
	for _, tc := range []struct {
		name  string
		s     Snapshot
		state lock.State
		want  string
	}{
		{"completing", Snapshot{Own: &lock.Record{State: lock.InMaintenance}}, lock.Completing, CompletingMessage},
		{"completing after a failure", Snapshot{Own: &lock.Record{State: lock.Failed}}, lock.Completing, CompletingAfterFailure},
		{"a drain failed and holds", Snapshot{Request: req, FailedRequest: "r1", FailedWhy: "drain failed: x"}, lock.Failed, "drain failed: x"},
		{"released by an admin", Snapshot{Request: req, Own: &lock.Record{State: lock.Failed, ByAdmin: true}, Self: &NodeFacts{Quarantined: true},
			Params: Params{RequestFile: "/var/maintenance-required"}}, lock.Failed, "lock released by an admin; remove /var/maintenance-required once the node is repaired (a new request starts over)"},
		{"quarantined by itself", Snapshot{Request: req, Own: &failed, Self: &NodeFacts{Quarantined: true}}, lock.Failed, failed.Message},
		{"failed, not quarantined", Snapshot{Request: req, Own: &failed, Self: &NodeFacts{}, Params: Params{RequestFile: "/r"}}, lock.Failed, "lock released by an admin; remove /r once the node is repaired (a new request starts over)"},
	} {
		o := tc.s.Observed()
		if tc.state == lock.Failed && tc.s.FailedWhy == "" {
			o.ReleasedRequest = "r1"
		}
		if got := ending(tc.s, o, tc.state); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}
