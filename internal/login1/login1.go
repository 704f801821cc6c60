// Package login1 talks to systemd-logind over the system D-Bus: inhibitor
// locks, the PrepareForShutdown signal, reboots and the list of inhibitors.
// Every call takes a context and every error is checked: go-systemd's
// login1 wrapper offers neither for these calls, so godbus is used directly.
package login1

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

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
	call := m.obj.CallWithContext(ctx, manager+".ListInhibitors", 0)
	if call.Err != nil {
		return nil, fmt.Errorf("logind ListInhibitors: %w", call.Err)
	}
	return decodeInhibitors(call.Body)
}

// decodeInhibitors decodes ListInhibitors' reply, a(ssssuu) (what, who,
// why, mode, uid, pid), into typed structs: a reply of another shape is an
// error, never an inhibitor with an empty mode (which would not block,
// and could open the reboot gate while a block inhibitor is held).
// (dbus.Store would convert what Go converts: an integer into a one-rune
// string.)
func decodeInhibitors(body []any) ([]Inhibitor, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("logind ListInhibitors: unexpected reply (want a(ssssuu)): "+format, args...)
	}
	if len(body) != 1 {
		return nil, bad("%d values", len(body))
	}
	var rows [][]any
	switch v := body[0].(type) {
	case [][]any:
		rows = v
	case []any:
		for _, r := range v {
			row, ok := r.([]any)
			if !ok {
				return nil, bad("an element of type %T", r)
			}
			rows = append(rows, row)
		}
	default:
		return nil, bad("a value of type %T", body[0])
	}
	out := make([]Inhibitor, 0, len(rows))
	for i, r := range rows {
		if len(r) != 6 {
			return nil, bad("inhibitor %d has %d fields", i+1, len(r))
		}
		var in Inhibitor
		for j, dst := range []any{&in.What, &in.Who, &in.Why, &in.Mode, &in.UID, &in.PID} {
			ok := false
			switch d := dst.(type) {
			case *string:
				*d, ok = r[j].(string)
			case *uint32:
				*d, ok = r[j].(uint32)
			}
			if !ok {
				return nil, bad("field %d of inhibitor %d is a %T", j+1, i+1, r[j])
			}
		}
		out = append(out, in)
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

// InhibitDelayMax is logind's effective InhibitDelayMaxSec: how long a
// delay inhibitor may hold a shutdown.
func (m *Manager) InhibitDelayMax(ctx context.Context) (time.Duration, error) {
	var v dbus.Variant
	if err := m.obj.CallWithContext(ctx, "org.freedesktop.DBus.Properties.Get", 0, manager, "InhibitDelayMaxUSec").Store(&v); err != nil {
		return 0, fmt.Errorf("logind InhibitDelayMaxUSec: %w", err)
	}
	usec, ok := v.Value().(uint64)
	if !ok {
		return 0, fmt.Errorf("logind InhibitDelayMaxUSec: unexpected value %s", v)
	}
	return time.Duration(usec) * time.Microsecond, nil
}
