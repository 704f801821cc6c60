package ctl

import (
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/history"
	"github.com/kustodian/kustodian/internal/status"
	"github.com/kustodian/kustodian/internal/status/statustest"
)

func TestFleetProgress(t *testing.T) {
	in := statustest.Fixture()
	in.Control = nil
	for i := range in.Nodes {
		switch in.Nodes[i].Name {
		case "n6": // done 2 minutes ago, in this rollout
			in.Nodes[i].Annotations[history.Annotation] = `[{"requested":"2026-11-22T11:50:00Z","started":"2026-11-22T11:51:00Z","ended":"2026-11-22T11:58:00Z","result":"succeeded"}]`
		case "n5": // done yesterday: not this rollout's
			in.Nodes[i].Annotations[history.Annotation] = `[{"requested":"2026-11-21T11:50:00Z","started":"2026-11-21T11:51:00Z","ended":"2026-11-21T11:58:00Z","result":"failed"}]`
		}
	}
	s := status.Build(in)
	since := statustest.Now.Add(-10 * time.Minute)
	// Every node takes 7 minutes (n6's, its policy's only history): n1, in
	// since 11:58, ends at 12:05, then n3 and n2; n4's agent is silent.
	want := "12:00:00  progress: 1/5 done, 1 in maintenance, 3 waiting, 0 failed; elapsed 10m; ETA 12:19:00 UTC (in 19m), without n4 (not placed: status NODE says why)"
	if got := fleetProgress(s, since, false); got != want {
		t.Errorf("plain:\n got %s\nwant %s", got, want)
	}
	wantBar := "[####--------------------] 1/5 done"
	if got := fleetProgress(s, since, true); len(got) < len(wantBar) || got[:len(wantBar)] != wantBar {
		t.Errorf("terminal: %s, want it to start with %s", got, wantBar)
	}
	if got := rolloutStart(s); !got.Equal(statustest.Now.Add(-5 * time.Minute)) {
		t.Errorf("rolloutStart = %v, want the earliest request, 5 minutes ago", got)
	}
}
