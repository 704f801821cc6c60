package kured

import (
	"strings"
	"testing"
	"time"
)

// Whatever Kured's annotation holds, reading it never panics, and taking
// and giving back the lock changes exactly the agent's own entry: what
// Take adds, GiveBack removes, byte for byte.
func FuzzKuredLock(f *testing.F) {
	for _, seed := range []string{
		"",
		`{"nodeID":"","metadata":{"unschedulable":false},"created":"2026-11-22T11:00:00Z","TTL":0}`,
		`{"nodeID":"n1","metadata":{"unschedulable":false},"created":"2026-11-22T11:00:00Z","TTL":0}`,
		`{"maxOwners":2,"locks":[{"nodeID":"n1","created":"2026-11-22T11:59:00Z","TTL":0}]}`,
		`{"maxOwners":2,"locks":[]}`,
		`{"maxOwners":3,"locks":null}`,
		`{"maxOwners":2,"locks":[],"other":[]}`,
		`{"maxOwners":2,"locks":[{"nodeID":"n1"}],"other":null}`,
		`{"nodeID":"kustodian:n9","metadata":{"unschedulable":false},"created":"2026-11-22T12:00:00Z","TTL":0}x`,
		`{"maxOwners":2,"locks":[{"nodeID":"kustodian:n9","metadata":{"unschedulable":false},"created":"2026-11-22T12:00:00Z","TTL":0},{"nodeID":"n1"}]}`,
	} {
		f.Add(seed)
	}
	const id = "kustodian:n9"
	entry, err := Entry(id, time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, value string) {
		parsed, perr := ParseLock(value)
		now := time.Date(2026, 11, 22, 12, 30, 0, 0, time.UTC)
		_ = parsed.Others(id, now)
		_ = parsed.Full(id, now)
		GiveBack(value, id) // must not panic, whatever the value
		taken, ok := Take(value, entry)
		if !ok || perr != nil || strings.Contains(value, `"nodeID":"`+id+`"`) {
			return
		}
		l, err := ParseLock(taken)
		if err != nil {
			t.Fatalf("Take(%q) = %q, which does not parse: %v", value, taken, err)
		}
		found := false
		for _, h := range l.Holders {
			found = found || h.NodeID == id
		}
		if !found {
			t.Fatalf("Take(%q) = %q, without the entry of %s", value, taken, id)
		}
		back, ok := GiveBack(taken, id)
		free := value == "" || strings.HasPrefix(value, `{"nodeID":"",`)
		if rest, isNull := strings.CutSuffix(value, `,"locks":null}`); isNull {
			value = rest + `,"locks":[]}` // Kured reads an empty list as it reads null
		}
		switch {
		case !ok:
			t.Fatalf("GiveBack(%q) refused", taken)
		case free && back != "":
			t.Fatalf("giving back a taken free lock %q left %q, want the annotation gone", value, back)
		case !free && back != value:
			t.Fatalf("take and give back changed %q into %q", value, back)
		}
	})
}
