package fleet

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const twoRings = `apiVersion: kustodian.io/v1alpha1
kind: Fleet
rings:
- {name: staging, contexts: [stage-eu], soak: 1h}
- {name: prod, contexts: [prod-eu, prod-us], soak: 0s}
`

func TestLoadNamesTheFleetAfterItsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "europe.yaml")
	if err := os.WriteFile(path, []byte(twoRings), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if f.Metadata.Name != "europe" || len(f.Rings) != 2 || f.Rings[0].Soak.Duration != time.Hour {
		t.Fatalf("loaded %+v", f)
	}
	if got := strings.Join(f.Contexts(), ","); got != "stage-eu,prod-eu,prod-us" {
		t.Errorf("contexts %s", got)
	}
	if f.RingOf("prod-us") != 1 || f.RingOf("nowhere") != -1 {
		t.Error("RingOf")
	}
}

func TestParseRefusesWhatIsNotAFleet(t *testing.T) {
	for _, c := range []struct{ text, says string }{
		{strings.Replace(twoRings, "kind: Fleet", "kind: Fleets", 1), "want apiVersion kustodian.io/v1alpha1, kind Fleet"},
		{twoRings + "extra: 1\n", `unknown field "extra"`},
		{"apiVersion: kustodian.io/v1alpha1\nkind: Fleet\n", "rings: none"},
		{strings.Replace(twoRings, "prod-us]", "stage-eu]", 1), "rings[1].contexts: context stage-eu is in ring staging already"},
		{strings.Replace(twoRings, "name: prod", "name: staging", 1), "rings[1].name: ring staging is named twice"},
		{strings.Replace(twoRings, "name: prod", "name: Prod", 1), `rings[1].name "Prod"`},
		{strings.Replace(twoRings, "soak: 1h", "soak: an hour", 1), "not a duration"},
		{strings.Replace(twoRings, "soak: 1h", "soak: -1h", 1), "rings[0].soak: -1h0m0s is negative"},
		{strings.Replace(twoRings, "[stage-eu]", "[]", 1), "rings[0].contexts: ring staging names no kubeconfig context"},
	} {
		_, err := Parse([]byte(c.text))
		if err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("Parse of\n%s\n= %v, want an error saying %q", c.text, err, c.says)
		}
	}
}

func mustParse(t *testing.T) *Fleet {
	t.Helper()
	f, err := Parse([]byte(twoRings))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

var t0 = time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)

func TestNextGoesRingByRingWithASoak(t *testing.T) {
	f := mustParse(t)
	seen := map[string]Cluster{"stage-eu": {}, "prod-eu": {}, "prod-us": {}}
	m := Next(f, seen, t0)
	if m.Ring != 0 || strings.Join(m.Create, ",") != "stage-eu" || m.Done || m.Halted != "" {
		t.Fatalf("first move %+v, want ring 0 created in stage-eu", m)
	}
	seen["stage-eu"] = Cluster{Exists: true, Says: "1 of 3 nodes succeeded"}
	if m := Next(f, seen, t0); len(m.Create) != 0 || len(m.Waiting) != 1 || !strings.Contains(m.Waiting[0], "1 of 3") {
		t.Fatalf("ring 0 running: %+v", m)
	}
	done := t0.Add(10 * time.Minute)
	seen["stage-eu"] = Cluster{Exists: true, Complete: true, CompletedAt: done}
	m = Next(f, seen, done.Add(59*time.Minute))
	if m.Ring != 0 || len(m.Create) != 0 || !m.SoakEnds.Equal(done.Add(time.Hour)) {
		t.Fatalf("within the soak: %+v", m)
	}
	m = Next(f, seen, done.Add(time.Hour))
	if m.Ring != 1 || strings.Join(m.Create, ",") != "prod-eu,prod-us" {
		t.Fatalf("after the soak: %+v, want ring 1 in both clusters", m)
	}
	seen["prod-eu"] = Cluster{Exists: true, Complete: true, CompletedAt: done}
	seen["prod-us"] = Cluster{Exists: true, Complete: true, CompletedAt: done.Add(2 * time.Hour)}
	if m := Next(f, seen, done.Add(2*time.Hour)); !m.Done || m.Ring != 2 {
		t.Fatalf("every ring complete (ring 1 soaks 0s): %+v", m)
	}
}

func TestAnUnreachableClusterIsWaitedForAndTheOthersGoOn(t *testing.T) {
	f := mustParse(t)
	seen := map[string]Cluster{
		"stage-eu": {Exists: true, Complete: true, CompletedAt: t0},
		"prod-eu":  {},
		"prod-us":  {Err: errors.New("dial tcp 127.0.0.1:1: connection refused")},
	}
	m := Next(f, seen, t0.Add(2*time.Hour))
	if strings.Join(m.Create, ",") != "prod-eu" || len(m.Waiting) != 1 || !strings.Contains(m.Waiting[0], "cluster prod-us unreachable: dial tcp") {
		t.Fatalf("%+v: want prod-eu created and prod-us waited for", m)
	}
	// Unreachable in a ring that completed before: the fleet waits too,
	// it does not take the ring as done.
	seen = map[string]Cluster{"stage-eu": {Err: errors.New("timeout")}, "prod-eu": {}, "prod-us": {}}
	if m := Next(f, seen, t0); m.Ring != 0 || len(m.Create) != 0 || m.Done {
		t.Fatalf("%+v: ring 0 unread, nothing may start", m)
	}
}

func TestAFailureAnywhereHaltsTheRingsNotStarted(t *testing.T) {
	f := mustParse(t)
	seen := map[string]Cluster{"stage-eu": {Exists: true, Failed: true, Says: "node n1: script exited 1"}, "prod-eu": {}, "prod-us": {}}
	m := Next(f, seen, t0.Add(24*time.Hour))
	if !strings.Contains(m.Halted, "cluster stage-eu failed: node n1: script exited 1") || len(m.Create) != 0 {
		t.Fatalf("%+v: want halted", m)
	}
	// Complete in ring 0, failed in ring 1 where it was made by hand:
	// ring 1's other cluster gets nothing.
	seen = map[string]Cluster{"stage-eu": {Exists: true, Complete: true, CompletedAt: t0}, "prod-eu": {}, "prod-us": {Exists: true, Failed: true}}
	if m := Next(f, seen, t0.Add(24*time.Hour)); m.Halted == "" || len(m.Create) != 0 {
		t.Fatalf("%+v: want halted", m)
	}
	seen = map[string]Cluster{"stage-eu": {Exists: true, Aborted: true}}
	if m := Next(f, seen, t0); !strings.Contains(m.Halted, "aborted") {
		t.Fatalf("%+v: an abort halts", m)
	}
	seen = map[string]Cluster{"stage-eu": {Exists: true, Conflict: "another revision"}}
	if m := Next(f, seen, t0); !strings.Contains(m.Halted, "cluster stage-eu: another revision") {
		t.Fatalf("%+v: a conflict halts", m)
	}
}

func TestAPauseAnywhereSubmitsNothing(t *testing.T) {
	f := mustParse(t)
	seen := map[string]Cluster{"stage-eu": {Exists: true, Complete: true, Paused: true, CompletedAt: t0}, "prod-eu": {}, "prod-us": {}}
	m := Next(f, seen, t0.Add(2*time.Hour))
	if len(m.Create) != 0 || len(m.Waiting) != 1 || !strings.Contains(m.Waiting[0], "paused in stage-eu") {
		t.Fatalf("%+v: want nothing submitted while paused", m)
	}
}

func TestETAAddsTheRingsAndTheirSoaks(t *testing.T) {
	f := mustParse(t)
	seen := map[string]Cluster{
		"stage-eu": {Exists: true, Takes: 20 * time.Minute},
		"prod-eu":  {Takes: 30 * time.Minute},
		"prod-us":  {Takes: 50 * time.Minute},
	}
	// 20m in staging, its 1h soak, then prod's longest cluster, 50m.
	if eta, ok := ETA(f, seen, t0); !ok || !eta.Equal(t0.Add(20*time.Minute+time.Hour+50*time.Minute)) {
		t.Errorf("ETA %s %v", eta, ok)
	}
	// Staging completed 10m ago: its soak has 50m left.
	seen["stage-eu"] = Cluster{Exists: true, Complete: true, CompletedAt: t0.Add(-10 * time.Minute)}
	if eta, ok := ETA(f, seen, t0); !ok || !eta.Equal(t0.Add(50*time.Minute+50*time.Minute)) {
		t.Errorf("ETA %s %v", eta, ok)
	}
	seen["prod-us"] = Cluster{Unknown: true}
	if _, ok := ETA(f, seen, t0); ok {
		t.Error("an ETA without prod-us's prediction")
	}
}

func TestAHaltNamesTheRingItStopsAt(t *testing.T) {
	f := mustParse(t)
	seen := map[string]Cluster{
		"stage-eu": {Exists: true, Complete: true, CompletedAt: t0},
		"prod-eu":  {Exists: true, Failed: true, Says: "node p1: exit 1"},
		"prod-us":  {Exists: true},
	}
	if m := Next(f, seen, t0.Add(2*time.Hour)); m.Ring != 1 || !strings.Contains(m.Halted, "cluster prod-eu failed") {
		t.Errorf("%+v: want halted at ring 1 (prod)", m)
	}
}

func TestARingTheRolloutWentPastIsNotSubmittedAgain(t *testing.T) {
	f := mustParse(t)
	// stage-eu's copy was deleted after it ran; prod has its copies.
	seen := map[string]Cluster{
		"stage-eu": {},
		"prod-eu":  {Exists: true, Complete: true, CompletedAt: t0},
		"prod-us":  {Exists: true, Complete: true, CompletedAt: t0},
	}
	m := Next(f, seen, t0)
	if !m.Done || len(m.Create) != 0 || len(m.Passed) != 1 || !strings.Contains(m.Passed[0], "cluster stage-eu has no copy") {
		t.Errorf("%+v: want done, stage-eu passed over", m)
	}
}

func TestTheLastRingsSoakIsNotWaitedFor(t *testing.T) {
	f := mustParse(t)
	f.Rings[1].Soak.Duration = time.Hour
	seen := map[string]Cluster{
		"stage-eu": {Exists: true, Complete: true, CompletedAt: t0},
		"prod-eu":  {Exists: true, Complete: true, CompletedAt: t0.Add(2 * time.Hour)},
		"prod-us":  {Exists: true, Complete: true, CompletedAt: t0.Add(2 * time.Hour)},
	}
	if m := Next(f, seen, t0.Add(2*time.Hour)); !m.Done {
		t.Errorf("%+v: want done as the last ring completes", m)
	}
}
