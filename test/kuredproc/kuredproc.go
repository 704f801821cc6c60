// Package kuredproc runs Kured's own binary (make kured) for the interop
// tests, each instance sandboxed: PID 1 of a PID and mount namespace of
// its own (unshare), so that its nsenter -m/proc/1/ns/mnt reaches the
// sandbox, never this machine; the in-cluster credentials Kured reads are
// on a tmpfs over /run in that namespace alone; its reboot command only
// leaves a mark the test can see.
package kuredproc

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Config is one Kured instance.
type Config struct {
	Binary      string // Kured's binary
	Node        string // --node-id
	DSNamespace string // where Kured's DaemonSet (and its lock) is
	APIHost     string // the API server, as in-cluster config finds it
	APIPort     int
	Token       []byte // a token of Kured's ServiceAccount
	CA          []byte // the API server's CA
	Period      time.Duration
	Concurrency int
	Dir         string   // the instance's files: sentinel, reboot mark, log
	Args        []string // more of Kured's flags
}

// Kured is a running instance.
type Kured struct {
	cfg  Config
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	log  bytes.Buffer
}

// Sentinel is the file whose presence tells Kured a reboot is required.
func (c Config) Sentinel() string { return filepath.Join(c.Dir, "reboot-required") }

// Mark is the file Kured's reboot command creates.
func (c Config) Mark() string { return filepath.Join(c.Dir, "rebooted") }

// script makes the sandbox and runs Kured in it ("$0": the files' directory).
const script = `set -e
mount -t tmpfs kured-sandbox /run
sa=/run/secrets/kubernetes.io/serviceaccount
mkdir -p $sa
cp "$0/token" "$0/ca.crt" "$0/namespace" $sa/
exec "$@"`

// Start starts Kured in its sandbox.
func Start(cfg Config) (*Kured, error) {
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	for name, b := range map[string][]byte{"token": cfg.Token, "ca.crt": cfg.CA, "namespace": []byte(cfg.DSNamespace)} {
		if err := os.WriteFile(filepath.Join(cfg.Dir, name), b, 0o600); err != nil {
			return nil, err
		}
	}
	args := []string{"--fork", "--kill-child", "--pid", "--mount", "--mount-proc", "--propagation", "private", "/bin/sh", "-c", script, cfg.Dir,
		cfg.Binary, "--node-id=" + cfg.Node, "--ds-namespace=" + cfg.DSNamespace, "--ds-name=kured",
		"--period=" + cfg.Period.String(), "--reboot-sentinel=" + cfg.Sentinel(),
		"--reboot-command=/bin/touch " + cfg.Mark(), "--log-format=text"}
	if cfg.Concurrency > 1 {
		args = append(args, "--concurrency="+strconv.Itoa(cfg.Concurrency))
	}
	args = append(args, cfg.Args...)
	k := &Kured{cfg: cfg, done: make(chan struct{})}
	k.cmd = exec.Command("unshare", args...)
	k.cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST="+cfg.APIHost, "KUBERNETES_SERVICE_PORT="+strconv.Itoa(cfg.APIPort))
	w := &lockedWriter{k: k}
	k.cmd.Stdout, k.cmd.Stderr = w, w
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := k.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting Kured for %s: %w", cfg.Node, err)
	}
	go func() { _ = k.cmd.Wait(); close(k.done) }()
	return k, nil
}

type lockedWriter struct{ k *Kured }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.k.mu.Lock()
	defer w.k.mu.Unlock()
	return w.k.log.Write(p)
}

// Log is what Kured printed so far.
func (k *Kured) Log() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.log.String()
}

// Sentinel is the file whose presence tells this Kured a reboot is required.
func (k *Kured) Sentinel() string { return k.cfg.Sentinel() }

// Rebooted reports whether Kured ran its reboot command.
func (k *Kured) Rebooted() bool {
	_, err := os.Stat(k.cfg.Mark())
	return err == nil
}

// Stop kills the sandbox (its PID 1, and with it every process in it) by
// the PID this package started, and waits for it.
func (k *Kured) Stop() {
	select {
	case <-k.done:
		return
	default:
	}
	_ = k.cmd.Process.Kill()
	<-k.done
}

// Exited reports whether the sandbox ended by itself.
func (k *Kured) Exited() bool {
	select {
	case <-k.done:
		return true
	default:
		return false
	}
}
