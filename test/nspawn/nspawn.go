// Package nspawn boots real systemd hosts for Kustodian's end-to-end tests:
// a Debian bookworm root file system made with debootstrap (cached as a
// tarball outside the repository), copied per host and booted with
// `systemd-nspawn -b --register=no --keep-unit`. The hosts share the host's
// network, so their agents reach the local control plane on 127.0.0.1.
// Commands run inside through nsenter; a reboot inside makes nspawn exit
// 133, and Boot starts the same directory again.
package nspawn

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Suite is the Debian release of the hosts.
const Suite = "bookworm"

// Packages are installed into the root file system besides debootstrap's
// minimal base. Changing them changes the cache key.
// openssh-server, python3 and python3-apt let Ansible manage a host; curl
// fetches a repository's key, as the README's quickstart does.
var Packages = []string{"systemd", "systemd-sysv", "dbus", "psmisc", "procps", "openssh-server", "python3", "python3-apt", "curl", "ca-certificates"}

// imageVersion changes the cache key when prepareRoot changes.
const imageVersion = "3"

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// EnableSSH starts sshd in the booted host on 127.0.0.1:port, letting in
// root with authorizedKey (a public key line).
func (h *Host) EnableSSH(ctx context.Context, port int, authorizedKey string) error {
	conf := fmt.Sprintf("Port %d\nListenAddress 127.0.0.1\nPermitRootLogin prohibit-password\n", port)
	if err := os.WriteFile(filepath.Join(h.Dir, "etc/ssh/sshd_config.d/test.conf"), []byte(conf), 0o644); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(h.Dir, "root/.ssh"), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(h.Dir, "root/.ssh/authorized_keys"), []byte(authorizedKey), 0o600); err != nil {
		return err
	}
	if out, err := h.Exec(ctx, "systemctl", "enable", "--now", "ssh.service"); err != nil {
		return fmt.Errorf("starting sshd in %s: %v: %s", h.Name, err, out)
	}
	return nil
}

// ErrDown says that a host was down when a command was to run in it, or
// went down (a reboot, a poweroff) while the command ran.
var ErrDown = errors.New("the host is down")

// Host is one booted (or bootable) container.
type Host struct {
	Name string // machine name and hostname
	Dir  string // its root file system
	log  string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	exit   int
	leader int  // the container's PID 1, as seen from the host
	boots  int  // how many boots came up
	up     bool // Boot saw this run's systemd come up, and nspawn still runs
	keep   bool // KeepBooting boots it again after a reboot
}

// NewHost unpacks the root file system into dir for a host called name.
func NewHost(ctx context.Context, tarball, dir, name string) (*Host, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, "tar", "-C", dir, "-xf", tarball).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("unpacking the root file system for %s: %v: %s", name, err, out)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // it is the host's /
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "etc/hostname"), []byte(name+"\n"), 0o644); err != nil {
		return nil, err
	}
	return &Host{Name: name, Dir: dir, log: dir + ".console.log"}, nil
}

// Boot starts the host and waits until systemd inside reports running (or
// degraded) and D-Bus answers.
func (h *Host) Boot(ctx context.Context) error {
	logf, err := os.OpenFile(h.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command("systemd-nspawn", "-D", h.Dir, "-b", "--register=no", "--keep-unit",
		"--machine="+h.Name, "--console=pipe", "--quiet")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting systemd-nspawn for %s: %w", h.Name, err)
	}
	logf.Close()
	done := make(chan struct{})
	h.mu.Lock()
	h.cmd, h.done, h.leader, h.up = cmd, done, 0, false
	h.mu.Unlock()
	go func() {
		err := cmd.Wait()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
		h.mu.Lock()
		h.exit, h.up = code, false
		close(done) // under the lock: Boot never sees it open after up was cleared
		h.mu.Unlock()
	}()
	var last error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case <-done:
			return false, fmt.Errorf("systemd-nspawn for %s exited during boot; console: %s", h.Name, h.console(5))
		default:
		}
		if h.leaderPID() == 0 {
			last = errors.New("no container init yet")
			return false, nil
		}
		out, err := h.Exec(ctx, "systemctl", "is-system-running")
		state := strings.TrimSpace(out)
		if err != nil && state != "degraded" {
			last = fmt.Errorf("system %s", state)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("booting %s: %v (%v)", h.Name, err, last)
	}
	h.mu.Lock()
	select {
	case <-done:
	default:
		h.up = true
		h.boots++
	}
	h.mu.Unlock()
	return nil
}

func (h *Host) console(n int) string {
	b, _ := os.ReadFile(h.log)
	return lastLines(string(b), n)
}

// leaderPID finds the container's init: the process named systemd below
// the nspawn process; 0 while nspawn does not run (a PID kept from the run
// before a reboot would name a dead process, or another one).
func (h *Host) leaderPID() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cmd == nil || h.cmd.Process == nil {
		return 0
	}
	select {
	case <-h.done:
		return 0
	default:
	}
	if h.leader != 0 {
		return h.leader
	}
	queue := []int{h.cmd.Process.Pid}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, child := range children(pid) {
			if comm(child) == "systemd" {
				h.leader = child
				return child
			}
			queue = append(queue, child)
		}
	}
	return 0
}

func children(pid int) []int {
	var out []int
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, t := range tasks {
		b, _ := os.ReadFile(t)
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

func comm(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// Exec runs a command inside the host (its mount, PID, UTS and IPC
// namespaces; the network is shared) and returns its combined output. When
// the host is down, or the command fails because the host went down under
// it, the error wraps ErrDown (see WaitBoot).
func (h *Host) Exec(ctx context.Context, args ...string) (string, error) {
	boot := h.Boots()
	out, err := h.exec(ctx, args...)
	if err != nil && h.wentDown(ctx, boot) {
		return out, fmt.Errorf("%s: %s: %w (%v)", h.Name, strings.Join(args, " "), ErrDown, err)
	}
	return out, err
}

func (h *Host) exec(ctx context.Context, args ...string) (string, error) {
	pid := h.leaderPID()
	if pid == 0 {
		return "", fmt.Errorf("host %s is not running", h.Name)
	}
	nsargs := append([]string{"--target", strconv.Itoa(pid), "--mount", "--uts", "--ipc", "--pid", "--cgroup", "--",
		"/usr/bin/env", "-i", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SYSTEMD_PAGER=", "TERM=dumb"}, args...)
	out, err := exec.CommandContext(ctx, "nsenter", nsargs...).CombinedOutput()
	return string(out), err
}

// wentDown tells whether the host has not been up all along since boot
// number boot came up: it is booting, it booted again, nspawn exited, or
// systemd inside is shutting down (or past answering: then nspawn exits
// within seconds).
func (h *Host) wentDown(ctx context.Context, boot int) bool {
	h.mu.Lock()
	up, boots := h.up, h.boots
	h.mu.Unlock()
	if !up || boots != boot || !h.Running() {
		return true
	}
	out, _ := h.exec(ctx, "systemctl", "is-system-running")
	switch strings.TrimSpace(out) {
	case "running", "degraded", "starting", "initializing", "maintenance":
		return false
	case "stopping":
		return true
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := h.WaitExit(wctx)
	return err == nil
}

// Boots is how many of the host's boots came up: a command that fails
// with ErrDown can wait for the next one with WaitBoot(ctx, Boots(), ...)
// read before it ran.
func (h *Host) Boots() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.boots
}

// WaitBoot waits, at most timeout, until a boot after boot number after
// is up (KeepBooting boots the host again after a reboot). It fails at
// once when nothing will boot it: it powered off, or nobody keeps booting
// it.
func (h *Host) WaitBoot(ctx context.Context, after int, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.boots > after && h.up {
			return true, nil
		}
		select {
		case <-h.done:
			if !h.keep || h.exit != 133 {
				return false, fmt.Errorf("host %s is down (nspawn exited %d) and nothing boots it again", h.Name, h.exit)
			}
		default:
		}
		return false, nil
	})
}

// WaitExit waits for nspawn to exit and returns its exit code: 133 after a
// reboot inside, 0 after a poweroff.
func (h *Host) WaitExit(ctx context.Context) (int, error) {
	h.mu.Lock()
	done := h.done
	h.mu.Unlock()
	if done == nil {
		return 0, fmt.Errorf("host %s was never booted", h.Name)
	}
	select {
	case <-done:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.exit, nil
}

// KeepBooting boots the host again whenever it reboots (nspawn exits 133),
// as a machine comes back by itself, until stop is called; stop waits for
// the loop to end. A boot that fails is reported to logf.
func (h *Host) KeepBooting(logf func(format string, args ...any)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	h.mu.Lock()
	h.keep = true
	h.mu.Unlock()
	go func() {
		defer close(done)
		defer func() {
			h.mu.Lock()
			h.keep = false
			h.mu.Unlock()
		}()
		for {
			code, err := h.WaitExit(ctx)
			if err != nil || code != 133 {
				return
			}
			if err := h.Boot(ctx); err != nil {
				if ctx.Err() == nil {
					logf("booting %s again after its reboot: %v", h.Name, err)
				}
				return
			}
		}
	}()
	return func() { cancel(); <-done }
}

// Running reports whether nspawn still runs.
func (h *Host) Running() bool {
	h.mu.Lock()
	done := h.done
	h.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Journal is the host's journal (for logs of failed tests).
func (h *Host) Journal(ctx context.Context, unit string) string {
	args := []string{"journalctl", "--no-pager", "-o", "short-precise"}
	if unit != "" {
		args = append(args, "-u", unit)
	}
	if h.Running() {
		out, _ := h.Exec(ctx, args...)
		return out
	}
	out, _ := exec.CommandContext(ctx, "journalctl", append([]string{"-D", filepath.Join(h.Dir, "var/log/journal")}, args[1:]...)...).CombinedOutput()
	return string(out)
}

// Stop powers the host off, and kills nspawn (by its PID) if it does not
// exit in time (a delay inhibitor inside may hold the poweroff back that
// long), then whatever still runs in the host's root file system, so that
// the directory can be removed.
func (h *Host) Stop(ctx context.Context) {
	if !h.Running() {
		return
	}
	_, _ = h.Exec(ctx, "systemctl", "poweroff", "--no-block")
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := h.WaitExit(wctx); err == nil {
		return
	}
	h.mu.Lock()
	cmd := h.cmd
	h.mu.Unlock()
	_ = cmd.Process.Kill()
	_, _ = h.WaitExit(ctx)
	h.killLeft(ctx)
}

// killLeft kills the processes whose root is the host's root file system
// (nspawn killed leaves its container's processes running) and waits until
// none is left, for at most 30 s.
func (h *Host) killLeft(ctx context.Context) {
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		left := h.inside()
		for _, pid := range left {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		return len(left) == 0, nil
	})
}

// inside lists the processes whose root directory is the host's.
func (h *Host) inside() []int {
	dir, err := filepath.Abs(h.Dir)
	if err != nil {
		return nil
	}
	var out []int
	roots, _ := filepath.Glob("/proc/[0-9]*/root")
	for _, r := range roots {
		if link, err := os.Readlink(r); err == nil && link == dir {
			if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(r))); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}
