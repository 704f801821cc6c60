// Package systemd tells systemd about the agent through sd_notify: READY=1
// once started, STATUS= lines that `systemctl status kustodian` shows, and
// STOPPING=1. Outside systemd (NOTIFY_SOCKET unset) every call is a no-op.
package systemd

import (
	"log/slog"
	"strings"

	"github.com/coreos/go-systemd/v22/daemon"
)

// Notifier reports the service's state to its supervisor.
type Notifier interface {
	Ready()
	Status(line string)
	Stopping()
}

// SdNotifier notifies systemd.
type SdNotifier struct {
	Log *slog.Logger
}

var _ Notifier = SdNotifier{}

func (n SdNotifier) send(state string) {
	// false: never unset NOTIFY_SOCKET, or every later STATUS would be lost.
	if _, err := daemon.SdNotify(false, state); err != nil && n.Log != nil {
		n.Log.Warn("sd_notify failed", "state", state, "err", err)
	}
}

func (n SdNotifier) Ready()    { n.send(daemon.SdNotifyReady) }
func (n SdNotifier) Stopping() { n.send(daemon.SdNotifyStopping) }

// Status sets the one-line STATUS=; newlines would end the assignment.
func (n SdNotifier) Status(line string) {
	n.send("STATUS=" + strings.ReplaceAll(line, "\n", " "))
}
