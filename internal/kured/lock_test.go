package kured

import (
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
