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
