// Package login1 talks to systemd-logind over the system D-Bus: inhibitor
// locks, the PrepareForShutdown signal, reboots and the list of inhibitors.
// Every call takes a context and every error is checked: go-systemd's
// login1 wrapper offers neither for these calls, so godbus is used directly.
package login1

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/godbus/dbus/v5"
)

const (
	dest      = "org.freedesktop.login1"
	path      = dbus.ObjectPath("/org/freedesktop/login1")
	manager   = "org.freedesktop.login1.Manager"
	prepareFn = "PrepareForShutdown"
)

// Inhibitor is one inhibitor lock as logind lists it.
type Inhibitor struct {
	What, Who, Why, Mode string
	UID, PID             uint32
}

// Blocks reports whether the lock blocks shutdown.
func (i Inhibitor) Blocks(what string) bool {
	if i.Mode != "block" {
		return false
	}
	for _, w := range strings.Split(i.What, ":") {
		if w == what {
			return true
		}
	}
	return false
}

// Manager is a connection to logind.
type Manager struct {
	conn *dbus.Conn
	obj  dbus.BusObject
}

// Connect connects to the system bus (EXTERNAL authentication by uid). The
// connection is closed when ctx ends.
func Connect(ctx context.Context) (*Manager, error) {
	conn, err := dbus.ConnectSystemBus(dbus.WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("connecting to the system D-Bus: %w", err)
	}
	return &Manager{conn: conn, obj: conn.Object(dest, path)}, nil
}

// Close closes the connection; locks taken through it stay until their
// files are closed.
func (m *Manager) Close() error { return m.conn.Close() }

// Inhibit takes an inhibitor lock. The lock lasts until the returned file
// is closed: keep it referenced.
func (m *Manager) Inhibit(ctx context.Context, what, who, why, mode string) (*os.File, error) {
	var fd dbus.UnixFD
	if err := m.obj.CallWithContext(ctx, manager+".Inhibit", 0, what, who, why, mode).Store(&fd); err != nil {
		return nil, fmt.Errorf("logind Inhibit %s (%s): %w", what, mode, err)
	}
	return os.NewFile(uintptr(fd), "inhibit-"+what+"-"+mode), nil
}

// ListInhibitors lists every inhibitor lock on the host.
func (m *Manager) ListInhibitors(ctx context.Context) ([]Inhibitor, error) {
	var raw [][]any
	if err := m.obj.CallWithContext(ctx, manager+".ListInhibitors", 0).Store(&raw); err != nil {
		return nil, fmt.Errorf("logind ListInhibitors: %w", err)
	}
	out := make([]Inhibitor, 0, len(raw))
	for _, r := range raw {
		if len(r) != 6 {
			return nil, errors.New("logind ListInhibitors: unexpected reply")
		}
		i := Inhibitor{}
		i.What, _ = r[0].(string)
		i.Who, _ = r[1].(string)
		i.Why, _ = r[2].(string)
		i.Mode, _ = r[3].(string)
		i.UID, _ = r[4].(uint32)
		i.PID, _ = r[5].(uint32)
		out = append(out, i)
	}
	return out, nil
}

// Reboot asks logind to reboot the host now. The caller keeps running: a
// reboot is never exec'd.
func (m *Manager) Reboot(ctx context.Context) error {
	if call := m.obj.CallWithContext(ctx, manager+".Reboot", 0, false); call.Err != nil {
		return fmt.Errorf("logind Reboot: %w", call.Err)
	}
	return nil
}

// PrepareForShutdown delivers logind's PrepareForShutdown signals: true
// when a shutdown or reboot begins. Other signals on the connection are
// dropped. The channel closes when ctx ends.
func (m *Manager) PrepareForShutdown(ctx context.Context) (<-chan bool, error) {
	if err := m.conn.AddMatchSignalContext(ctx, dbus.WithMatchInterface(manager), dbus.WithMatchMember(prepareFn)); err != nil {
		return nil, fmt.Errorf("subscribing to logind %s: %w", prepareFn, err)
	}
	signals := make(chan *dbus.Signal, 8)
	m.conn.Signal(signals)
	out := make(chan bool, 1)
	go func() {
		defer close(out)
		defer m.conn.RemoveSignal(signals)
		for {
			select {
			case <-ctx.Done():
				return
			case sig, ok := <-signals:
				if !ok {
					return
				}
				if active, ok := parsePrepare(sig); ok {
					select {
					case out <- active:
					case <-ctx.Done():
						return
					}
				}
			}
		}
	}()
	return out, nil
}

// parsePrepare reads a PrepareForShutdown signal; ok is false for any other.
func parsePrepare(sig *dbus.Signal) (active, ok bool) {
	if sig == nil || sig.Name != manager+"."+prepareFn || len(sig.Body) != 1 {
		return false, false
	}
	active, ok = sig.Body[0].(bool)
	return active, ok
}

// Lock is an inhibitor lock that can be taken and released repeatedly,
// idempotently.
type Lock struct {
	m              *Manager
	what, who, why string
	mode           string

	mu   sync.Mutex
	file *os.File
}

// NewLock prepares a lock; nothing is taken yet.
func (m *Manager) NewLock(what, who, why, mode string) *Lock {
	return &Lock{m: m, what: what, who: who, why: why, mode: mode}
}

// Take takes the lock unless it is held.
func (l *Lock) Take(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil {
		return nil
	}
	f, err := l.m.Inhibit(ctx, l.what, l.who, l.why, l.mode)
	if err != nil {
		return err
	}
	l.file = f
	return nil
}

// Release drops the lock if it is held.
func (l *Lock) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file != nil {
		_ = l.file.Close()
		l.file = nil
	}
}

// Held reports whether the lock is held.
func (l *Lock) Held() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.file != nil
}
