package kured

import (
	"strings"
	"testing"
	"time"
)

func TestParseLock(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		value  string
		active []string
	}{
		{"", nil},
		{`{"nodeID":"","metadata":{"unschedulable":false},"created":"2026-11-22T11:00:00Z","TTL":0}`, nil},
		{`{"nodeID":"n1","metadata":{"unschedulable":false},"created":"2026-11-22T11:00:00Z","TTL":0}`, []string{"n1"}},
		// TTL in ns: one minute, expired an hour ago.
		{`{"nodeID":"n1","metadata":{"unschedulable":true},"created":"2026-11-22T10:00:00Z","TTL":60000000000}`, nil},
		{`{"maxOwners":2,"locks":[{"nodeID":"n1","created":"2026-11-22T11:59:00Z","TTL":0},{"nodeID":"kustodian:n2","created":"2026-11-22T11:59:00Z","TTL":0}]}`, []string{"n1", "kustodian:n2"}},
		{`{"maxOwners":2,"locks":[]}`, nil},
	} {
		l, err := ParseLock(tc.value)
		if err != nil {
			t.Fatalf("%s: %v", tc.value, err)
		}
		var got []string
		for _, h := range l.Active(now) {
			got = append(got, h.NodeID)
		}
		if len(got) != len(tc.active) {
			t.Errorf("%s: active %v, want %v", tc.value, got, tc.active)
			continue
		}
		for i := range got {
			if got[i] != tc.active[i] {
				t.Errorf("%s: active %v, want %v", tc.value, got, tc.active)
			}
		}
	}
	if _, err := ParseLock("{not json"); err == nil {
		t.Error("bad JSON accepted")
	}
}

func TestTakeAndGiveBack(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	mine, err := Entry(HolderID("a"), now)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"nodeID":"kustodian:a","metadata":{"unschedulable":false},"created":"2026-11-22T12:00:00Z","TTL":0}`; mine != want {
		t.Fatalf("entry %s, want %s", mine, want)
	}
	kuredEntry := `{"nodeID":"n1","metadata":{"unschedulable":false},"created":"2026-11-22T11:00:00Z","TTL":0}`
	for _, tc := range []struct{ before, taken string }{
		{"", mine},
		{`{"nodeID":"","metadata":{"unschedulable":false},"created":"0001-01-01T00:00:00Z","TTL":0}`, mine},
		{`{"maxOwners":2,"locks":[]}`, `{"maxOwners":2,"locks":[` + mine + `]}`},
		{`{"maxOwners":2,"locks":null}`, `{"maxOwners":2,"locks":[` + mine + `]}`},
		{`{"maxOwners":3,"locks":[` + kuredEntry + `]}`, `{"maxOwners":3,"locks":[` + kuredEntry + `,` + mine + `]}`},
	} {
		got, ok := Take(tc.before, mine)
		if !ok || got != tc.taken {
			t.Errorf("Take(%s) = %s %v, want %s", tc.before, got, ok, tc.taken)
			continue
		}
		if _, err := ParseLock(got); err != nil {
			t.Errorf("Take(%s) wrote what does not parse: %v", tc.before, err)
		}
		back, ok := GiveBack(got, HolderID("a"))
		want := tc.before
		if strings.HasPrefix(tc.before, `{"nodeID":""`) {
			want = "" // the annotation goes
		}
		if strings.HasSuffix(tc.before, `null}`) {
			want = `{"maxOwners":2,"locks":[]}`
		}
		if !ok || back != want {
			t.Errorf("GiveBack(%s) = %s %v, want %s", got, back, ok, want)
		}
	}
	// Our entry first of several, and in the middle.
	three := `{"maxOwners":3,"locks":[` + mine + `,` + kuredEntry + `]}`
	if back, ok := GiveBack(three, HolderID("a")); !ok || back != `{"maxOwners":3,"locks":[`+kuredEntry+`]}` {
		t.Errorf("GiveBack, first of two: %s %v", back, ok)
	}
	if _, ok := GiveBack(`{"maxOwners":2,"locks":[`+kuredEntry+`]}`, HolderID("a")); ok {
		t.Error("GiveBack of an entry that is not there")
	}
	if _, ok := Take(`{"nodeID":"n1","metadata":{"unschedulable":false},"created":"2026-11-22T11:00:00Z","TTL":0}`, mine); ok {
		t.Error("Take of a held single lock")
	}
	// Expired holders count: they are Kured's to replace.
	expired := Lock{MaxOwners: 1, Holders: []Holder{{NodeID: "n1", Created: now.Add(-time.Hour), TTL: time.Minute}}}
	if !expired.Full(HolderID("a"), now) || expired.Others(HolderID("a"), now)[0] != "n1 (expired)" {
		t.Errorf("an expired holder: full=%v others=%v", expired.Full(HolderID("a"), now), expired.Others(HolderID("a"), now))
	}
}
