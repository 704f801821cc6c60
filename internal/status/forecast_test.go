package status_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/history"
	"github.com/kustodian/kustodian/internal/policy"
	"github.com/kustodian/kustodian/internal/predict"
	"github.com/kustodian/kustodian/internal/status"
	"github.com/kustodian/kustodian/internal/status/statustest"
)

// pastDays writes a node's history as its agent would: one maintenance a
// day that held the lock for `held`.
func pastDays(held time.Duration, days int) string {
	var entries []string
	for d := days; d > 0; d-- {
		start := statustest.Now.Add(-time.Duration(d) * 24 * time.Hour)
		entries = append(entries, fmt.Sprintf(`{"requested":%q,"started":%q,"drained":%q,"ended":%q,"result":"succeeded","policy":"default"}`,
			start.Format(time.RFC3339), start.Format(time.RFC3339), start.Add(time.Minute).Format(time.RFC3339), start.Add(held).Format(time.RFC3339)))
	}
	return "[" + strings.Join(entries, ",") + "]"
}

func TestForecast(t *testing.T) {
	in := statustest.Fixture()
	held := map[string]time.Duration{"n1": 10 * time.Minute, "n2": 4 * time.Minute, "n3": 6 * time.Minute}
	for i := range in.Nodes {
		if d, ok := held[in.Nodes[i].Name]; ok {
			in.Nodes[i].Annotations[history.Annotation] = pastDays(d, 3)
		}
	}
	s := status.Build(in)
	f := status.ForecastOf(in, s, []string{"n6", "n3", "gone"}, time.Time{})

	m := func(d float64) time.Time { return statustest.Now.Add(time.Duration(d * float64(time.Minute))) }
	want := []struct {
		node       string
		start, end time.Time
		source     string
	}{
		{"n1", m(-2), m(8), predict.SourceNode},    // held the lock 2 minutes ago; 10 minutes
		{"n3", m(8), m(14), predict.SourceNode},    // first in the queue
		{"n2", m(14), m(18), predict.SourceNode},   //
		{"n6", m(18), m(24), predict.SourcePolicy}, // added: the median of 10, 4 and 6 minutes
	}
	if len(f.Schedule.Entries) != len(want) {
		t.Fatalf("scheduled %d nodes, want %d: %+v", len(f.Schedule.Entries), len(want), f.Schedule.Entries)
	}
	for i, w := range want {
		e := f.Schedule.Entries[i]
		if e.Node != w.node || !e.Start.Equal(w.start) || !e.End.Equal(w.end) || e.Estimate.Source != w.source {
			t.Errorf("entry %d: %s %s-%s (%s), want %s %s-%s (%s)", i, e.Node, e.Start.Format("15:04"), e.End.Format("15:04"), e.Estimate.Source,
				w.node, w.start.Format("15:04"), w.end.Format("15:04"), w.source)
		}
	}
	if got, want := f.Order, []string{"n1", "n3", "n2", "n6", "n4", "gone"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	if u := f.Nodes["n4"].Unplaced; !strings.Contains(u, "silent") {
		t.Errorf("n4 (a silent agent) unplaced because %q", u)
	}
	if u := f.Nodes["gone"].Unplaced; u != "no such Node" {
		t.Errorf("gone unplaced because %q", u)
	}
	// Paused: every node that has not started is held by it until resumed.
	if g := f.Nodes["n2"].Gates; len(g) == 0 || g[0].Gate != "paused" || g[0].Opens != nil {
		t.Errorf("n2's gates %+v, want paused first, with no opening", g)
	}
	if g := f.Nodes["n1"].Gates; len(g) != 0 {
		t.Errorf("n1 is in maintenance; gates %+v", g)
	}
}

func TestForecastWindow(t *testing.T) {
	in := statustest.Fixture()
	in.Control = nil
	in.Leases = nil // nobody in maintenance, nobody waiting
	// A window from 12:00 to 12:30 UTC; it is 12:00.
	p := &policy.MaintenancePolicy{Spec: policy.Spec{Windows: []policy.Window{{Start: "12:00", End: "12:30", TimeZone: "UTC"}}}}
	p.Name = "nightly"
	in.Policies = []*policy.MaintenancePolicy{p}
	for i := range in.Nodes {
		in.Nodes[i].Annotations[history.Annotation] = pastDays(12*time.Minute, 2)
	}
	f := status.ForecastOf(in, status.Build(in), []string{"n2", "n3", "n5", "n6"}, time.Time{})
	fit, ok := f.Fits["nightly"]
	if !ok {
		t.Fatalf("no fit for policy nightly: %+v", f.Fits)
	}
	// n2 12:00-12:12, n3 12:12-12:24, n5 12:24-12:36 (6 minutes over);
	// n6 waits for tomorrow's window.
	if fit.Fits || fit.FirstLate != "n5" || fit.Over != 6*time.Minute || fit.Late != 2 || !fit.Closes.Equal(statustest.Now.Add(30*time.Minute)) {
		t.Errorf("fit %+v, want n5 first late by 6m, 2 late, closing 12:30", fit)
	}
	if e := f.Nodes["n6"].Entry; e.Deferred != "window" || !e.Start.Equal(statustest.Now.Add(24*time.Hour)) {
		t.Errorf("n6 starts %s (%s), want tomorrow 12:00 (window)", e.Start, e.Deferred)
	}
}
