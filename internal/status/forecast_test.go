package status_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// A node whose record is in a newer format is not placed, and the plan
// says why; the queue behind it goes on without it.
func TestForecastLeavesOutARecordInANewerFormat(t *testing.T) {
	in := statustest.Fixture()
	for i := range in.Leases {
		if l := &in.Leases[i]; l.Name == "node-n3" {
			l.Annotations["kustodian.io/format"] = "2"
		}
	}
	f := status.ForecastOf(in, status.Build(in), []string{"n3"}, time.Time{})
	if u := f.Nodes["n3"].Unplaced; u != `its record is in format "2", which this kustodian-ctl does not read: upgrade it` {
		t.Errorf("n3 unplaced because %q", u)
	}
	for _, e := range f.Schedule.Entries {
		if e.Node == "n3" {
			t.Errorf("n3 is scheduled: %+v", e)
		}
	}
	if e := f.Nodes["n2"].Entry; e.Node != "n2" || !e.Start.Equal(statustest.Now.Add(8*time.Minute)) {
		t.Errorf("n2 starts %s, want 12:08, when n1 is done (n3 is not read)", e.Start.Format("15:04"))
	}
}

// A plan's later start holds the nodes it adds, not those of its list that
// are queued already (found by a review).
func TestForecastLaterStartLeavesTheQueue(t *testing.T) {
	in := statustest.Fixture()
	in.Control = nil
	later := statustest.Now.Add(2 * time.Hour)
	f := status.ForecastOf(in, status.Build(in), []string{"n3", "n6"}, later)
	if e := f.Nodes["n3"].Entry; e.Deferred != "" || !e.Start.Equal(statustest.Now.Add(8*time.Minute)) {
		t.Errorf("n3 (queued) starts %s (%s), want 12:08, when n1 is done", e.Start.Format("15:04"), e.Deferred)
	}
	if e := f.Nodes["n6"].Entry; e.Deferred != "start" || !e.Start.Equal(later) {
		t.Errorf("n6 (added) starts %s (%s), want 14:00 (start)", e.Start.Format("15:04"), e.Deferred)
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

// A failed holder keeps its lock: the queue behind it is not placed, and
// says why. With the lock free, the spacing counts from the lock's last
// release.
func TestForecastFailedHolderAndSpacing(t *testing.T) {
	in := statustest.Fixture()
	in.Control = nil
	for i := range in.Leases {
		if in.Leases[i].Name == "node-n1" {
			in.Leases[i].Annotations["kustodian.io/state"] = "Failed"
		}
	}
	f := status.ForecastOf(in, status.Build(in), nil, time.Time{})
	for _, n := range []string{"n3", "n2"} {
		if u := f.Nodes[n].Unplaced; !strings.Contains(u, "failed (n1)") {
			t.Errorf("%s: unplaced %q, want it to name the failed holder", n, u)
		}
	}
	if e := f.Nodes["n1"].Entry; !e.Stuck || !e.End.IsZero() {
		t.Errorf("n1: %+v, want stuck with no end", e)
	}

	in = statustest.Fixture()
	in.Control = nil
	p := &policy.MaintenancePolicy{Spec: policy.Spec{Spacing: &metav1.Duration{Duration: 5 * time.Minute}}}
	p.Name = "spaced"
	in.Policies = []*policy.MaintenancePolicy{p}
	var leases []coordv1.Lease
	for _, l := range in.Leases {
		if !strings.HasPrefix(l.Name, "lock-") && !strings.HasPrefix(l.Name, "node-") {
			leases = append(leases, l)
		}
	}
	released := statustest.Now.Add(-2 * time.Minute)
	lock := coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lock-spaced-0", Labels: map[string]string{"kustodian.io/policy": "spaced"},
		Annotations: map[string]string{"kustodian.io/released-at": released.Format(time.RFC3339Nano)}}}
	in.Leases = append(leases, lock)
	f = status.ForecastOf(in, status.Build(in), []string{"n6"}, time.Time{})
	e := f.Nodes["n6"].Entry
	if !e.Start.Equal(released.Add(5*time.Minute)) || e.Deferred != "spacing" {
		t.Errorf("n6 starts %s (%s), want 5 minutes after the lock's release at %s (spacing)", e.Start.Format("15:04:05"), e.Deferred, released.Format("15:04:05"))
	}
	if g := f.Nodes["n6"].Gates; len(g) != 1 || g[0].Gate != "spacing" || g[0].Opens == nil || !g[0].Opens.Equal(e.Start) {
		t.Errorf("n6's gates %+v, want spacing opening at its start", g)
	}
}
