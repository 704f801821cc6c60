package ctl

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	coordv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/yaml"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/status"
	"github.com/kustodian/kustodian/internal/status/statustest"
)

var update = flag.Bool("update", false, "rewrite the golden files")

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./internal/ctl -update writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s:\n--- got\n%s\n--- want\n%s", name, path, got, want)
	}
}

func TestStatusTables(t *testing.T) {
	s := status.Build(statustest.Fixture())
	for _, tc := range []struct {
		name   string
		output string
		all    bool
		nodes  []string
	}{
		{"status", "", false, nil},
		{"status-wide-all", "wide", true, nil},
		{"status-named", "", false, []string{"n5", "n1", "n3"}},
	} {
		sel, err := selectNodes(s, tc.nodes, tc.all)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := printStatus(&b, sel, outputOf(tc.output)); err != nil {
			t.Fatal(err)
		}
		if len(tc.nodes) > 0 {
			printGates(&b, sel.Nodes)
		}
		golden(t, tc.name, b.Bytes())
	}
	var b bytes.Buffer
	printQueue(&b, queueList(s), s.Time, s.Paused, false, true)
	golden(t, "queue", b.Bytes())
	// Resumed: each queued node's ETA (nobody has a history: 10 minutes
	// each, n1 in maintenance since 11:58).
	in := statustest.Fixture()
	in.Control = nil
	resumed := status.Build(in)
	b.Reset()
	printQueue(&b, queueList(resumed), resumed.Time, resumed.Paused, false, true)
	golden(t, "queue-resumed", b.Bytes())
}

func TestStatusObjectRoundTrips(t *testing.T) {
	s := status.Build(statustest.Fixture())
	for _, format := range []string{outputJSON, outputYAML} {
		var b bytes.Buffer
		if err := outputOf(format).Print(&b, s, nil); err != nil {
			t.Fatal(err)
		}
		var back status.MaintenanceStatus
		var err error
		if format == outputJSON {
			err = json.Unmarshal(b.Bytes(), &back)
		} else {
			err = yaml.Unmarshal(b.Bytes(), &back)
		}
		if err != nil {
			t.Fatalf("%s: %v", format, err)
		}
		if back.APIVersion != "kustodian.io/v1alpha1" || back.Kind != "MaintenanceStatus" {
			t.Errorf("%s: apiVersion %q kind %q", format, back.APIVersion, back.Kind)
		}
		if !reflect.DeepEqual(back.Nodes, s.Nodes) || !reflect.DeepEqual(back.Locks, s.Locks) {
			t.Errorf("%s does not round-trip:\n%s", format, b.String())
		}
	}
	// The documented field names (docs/ctl.md) are there.
	var raw map[string]any
	var b bytes.Buffer
	_ = outputOf(outputJSON).Print(&b, s, nil)
	_ = json.Unmarshal(b.Bytes(), &raw)
	for _, key := range []string{"apiVersion", "kind", "paused", "locks", "nodes"} {
		if _, ok := raw[key]; !ok {
			t.Errorf("JSON lacks %q", key)
		}
	}
	node := raw["nodes"].([]any)[0].(map[string]any)
	for _, key := range []string{"name", "state", "since", "queuePosition", "reason", "message", "requestID", "heartbeatAge"} {
		if _, ok := node[key]; !ok {
			t.Errorf("JSON node lacks %q: %v", key, node)
		}
	}
	l := raw["locks"].([]any)[0].(map[string]any)
	for _, key := range []string{"name", "group", "holder", "since"} {
		if _, ok := l[key]; !ok {
			t.Errorf("JSON lock lacks %q", key)
		}
	}
}

func TestSelectUnknownNode(t *testing.T) {
	if _, err := selectNodes(status.Build(statustest.Fixture()), []string{"nope"}, false); err == nil {
		t.Fatal("an unknown node was accepted")
	}
}

func TestChangesLines(t *testing.T) {
	in := statustest.Fixture()
	prev := status.Build(in)
	// The handoff: n1 is back to Idle, n3 holds the lock and drains.
	var leases []coordv1.Lease
	for _, l := range in.Leases {
		l := *l.DeepCopy()
		switch l.Name {
		case lock.RecordName("n1"):
			continue
		case lock.RecordName("n3"):
			r := lock.RecordFromLease(&l)
			r.State, r.Message = lock.Draining, "cordoned; draining: 2 pods left"
			r.ApplyTo(&l)
		case lock.DefaultGroup.LockName(0):
			holder := "n3"
			l.Spec.HolderIdentity = &holder
		}
		leases = append(leases, l)
	}
	in.Leases = leases
	cur := status.Build(in)
	var b bytes.Buffer
	for _, line := range changes(prev, cur, statusRows(nil, false)) {
		b.WriteString(line + "\n")
	}
	golden(t, "changes", b.Bytes())
}
