package ctl

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/history"
	"github.com/kustodian/kustodian/internal/policy"
	"github.com/kustodian/kustodian/internal/status/statustest"
)

func TestPlanTable(t *testing.T) {
	in := statustest.Fixture()
	// n1's last maintenance held the lock 10 minutes; the others have none.
	for i := range in.Nodes {
		if in.Nodes[i].Name == "n1" {
			in.Nodes[i].Annotations[history.Annotation] = `[{"requested":"2026-11-21T12:00:00Z","started":"2026-11-21T12:00:00Z","drained":"2026-11-21T12:01:00Z","ended":"2026-11-21T12:10:00Z","result":"succeeded"}]`
		}
	}
	p := &policy.MaintenancePolicy{Spec: policy.Spec{NodeSelector: nil, Windows: []policy.Window{{Start: "11:00", End: "12:05", TimeZone: "UTC"}}}}
	p.Name = "day"
	in.Policies = []*policy.MaintenancePolicy{p}
	refused := func(node string) ([]RefusedEviction, error) {
		if node == "n6" {
			return []RefusedEviction{{Pod: "shop/web-1", Reason: "Cannot evict pod as it would violate the pod's disruption budget: The disruption budget web needs 2 healthy pods and has 2 currently"}}, nil
		}
		return nil, nil
	}
	plan, err := buildPlan(in, planFlags{}, []string{"n6"}, refused)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := printPlan(&b, plan, true, true); err != nil {
		t.Fatal(err)
	}
	golden(t, "plan", b.Bytes())
	// n6 follows policy day (every node, but those whose records joined
	// the default group before it existed): alone in its group, from
	// 12:00 to 12:10, 5 minutes past its window's close at 12:05. The
	// default group's nodes have no window.
	if len(plan.Windows) != 1 || plan.Windows[0].Fits || plan.Windows[0].FirstLate != "n6" || plan.Windows[0].OverSeconds != 300 || plan.Windows[0].Late != 1 {
		t.Errorf("windows %+v, want n6 the one late, by 300 s", plan.Windows)
	}
	if !strings.Contains(plan.Summary, "shop/web-1") || !strings.Contains(plan.Summary, "does NOT fit") {
		t.Errorf("summary %q names neither the pod nor the overrun", plan.Summary)
	}
}

func TestParseStart(t *testing.T) {
	now := time.Date(2026, 11, 27, 23, 30, 0, 0, time.UTC)
	for s, want := range map[string]time.Time{
		"":                     now,
		"2026-11-28T22:00:00Z": time.Date(2026, 11, 28, 22, 0, 0, 0, time.UTC),
		"23:45":                time.Date(2026, 11, 27, 23, 45, 0, 0, time.UTC),
		"22:00":                time.Date(2026, 11, 28, 22, 0, 0, 0, time.UTC), // passed today: tomorrow's
	} {
		if got, err := parseStart(s, now); err != nil || !got.Equal(want) {
			t.Errorf("parseStart(%q) = %v, %v; want %v", s, got, err, want)
		}
	}
	if _, err := parseStart("tonight", now); err == nil || !strings.Contains(err.Error(), "--start") {
		t.Errorf("parseStart(tonight): %v, want an error naming --start", err)
	}
}
