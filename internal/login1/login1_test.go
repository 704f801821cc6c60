package login1

import (
	"testing"

	"github.com/godbus/dbus/v5"
)

func TestParsePrepare(t *testing.T) {
	for _, tc := range []struct {
		sig          *dbus.Signal
		active, isOK bool
	}{
		{&dbus.Signal{Name: "org.freedesktop.login1.Manager.PrepareForShutdown", Body: []any{true}}, true, true},
		{&dbus.Signal{Name: "org.freedesktop.login1.Manager.PrepareForShutdown", Body: []any{false}}, false, true},
		{&dbus.Signal{Name: "org.freedesktop.login1.Manager.PrepareForSleep", Body: []any{true}}, false, false},
		{&dbus.Signal{Name: "org.freedesktop.login1.Manager.PrepareForShutdown", Body: []any{"yes"}}, false, false},
		{&dbus.Signal{Name: "org.freedesktop.DBus.NameAcquired", Body: []any{":1.5"}}, false, false},
		{nil, false, false},
	} {
		active, ok := parsePrepare(tc.sig)
		if active != tc.active || ok != tc.isOK {
			t.Errorf("parsePrepare(%+v) = %v, %v; want %v, %v", tc.sig, active, ok, tc.active, tc.isOK)
		}
	}
}

func TestBlocks(t *testing.T) {
	for _, tc := range []struct {
		i    Inhibitor
		want bool
	}{
		{Inhibitor{What: "shutdown", Mode: "block"}, true},
		{Inhibitor{What: "sleep:shutdown:idle", Mode: "block"}, true},
		{Inhibitor{What: "shutdown", Mode: "delay"}, false},
		{Inhibitor{What: "sleep", Mode: "block"}, false},
		{Inhibitor{What: "handle-power-key:shutdown-extra", Mode: "block"}, false},
	} {
		if got := tc.i.Blocks("shutdown"); got != tc.want {
			t.Errorf("%+v blocks shutdown: %v, want %v", tc.i, got, tc.want)
		}
	}
}

// ListInhibitors' reply decodes into typed structs; any other shape is an
// error rather than an inhibitor with an empty mode.
func TestDecodeInhibitors(t *testing.T) {
	good := []any{[][]any{
		{"shutdown:sleep", "kustodian", "draining", "block", uint32(0), uint32(42)},
		{"shutdown", "ModemManager", "ModemManager needs to reset devices", "delay", uint32(0), uint32(7)},
	}}
	got, err := decodeInhibitors(good)
	if err != nil {
		t.Fatal(err)
	}
	want := []Inhibitor{{"shutdown:sleep", "kustodian", "draining", "block", 0, 42}, {"shutdown", "ModemManager", "ModemManager needs to reset devices", "delay", 0, 7}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("decoded %+v, want %+v", got, want)
	}
	if got, err := decodeInhibitors([]any{[][]any{}}); err != nil || len(got) != 0 {
		t.Errorf("no inhibitors: %+v %v", got, err)
	}
	for name, body := range map[string][]any{
		"mode not a string": {[][]any{{"shutdown", "x", "y", int32(1), uint32(0), uint32(1)}}},
		"a field missing":   {[][]any{{"shutdown", "x", "y", "block", uint32(0)}}},
		"not a list":        {"shutdown"},
		"nothing":           {},
	} {
		if got, err := decodeInhibitors(body); err == nil {
			t.Errorf("%s: decoded %+v, want an error", name, got)
		}
	}
}
