package agent

import (
	"testing"

	"github.com/kustodian/kustodian/internal/hostfiles"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/request"
)

// One request at a time: a cluster request the record works on keeps the
// node even when the host asks meanwhile; otherwise the host's file goes
// first.
func TestTheHostsRequestAndTheClustersTakeTurns(t *testing.T) {
	file := &hostfiles.Request{ID: "abc123", Reason: "kernel"}
	cr := &request.Request{UID: "u1", Reason: "disk\x1b swap", By: "admin"}
	for _, tc := range []struct {
		name string
		file *hostfiles.Request
		rec  *lock.Record
		want string
	}{
		{"nothing", nil, nil, ""},
		{"the cluster's alone", nil, nil, cr.ID()},
		{"the host's first", file, nil, file.ID},
		{"the host's first, the node Idle", file, &lock.Record{RequestID: cr.ID(), State: lock.Idle}, file.ID},
		{"the cluster's it works on", file, &lock.Record{RequestID: cr.ID(), State: lock.InMaintenance}, cr.ID()},
		{"the cluster's it worked on is over: it completes first", file, &lock.Record{RequestID: "request-gone", State: lock.InMaintenance}, ""},
	} {
		c := cr
		if tc.name == "nothing" {
			c = nil
		}
		got := requestOf(tc.file, c, tc.rec)
		id := ""
		if got != nil {
			id = got.ID
		}
		if id != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, id, tc.want)
		}
		if got != nil && got.ID == cr.ID() && got.Reason != "disk swap (asked by admin)" {
			t.Errorf("%s: reason %q", tc.name, got.Reason)
		}
	}
}
