package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Restart stops one component of the cluster (kube-apiserver, etcd, ...)
// by the PID kwokctl recorded, keeps it down for down, and starts it again
// with the same command line, environment and working directory, its
// output appended to its log; then waits until the cluster is healthy. The
// new PID replaces the old in the pid file, so Stop and Down find it.
func Restart(ctx context.Context, opts Options, component string, down time.Duration) error {
	opts.defaults()
	dir := opts.clusterDir()
	pidFile := filepath.Join(dir, "pids", component+".pid")
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return fmt.Errorf("restarting %s of cluster %s: %w", component, opts.Name, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 1 {
		return fmt.Errorf("restarting %s of cluster %s: pid file %s holds %q", component, opts.Name, pidFile, b)
	}
	argv, err := procStrings(pid, "cmdline")
	if err != nil || len(argv) == 0 {
		return fmt.Errorf("restarting %s of cluster %s: reading the command line of %d: %v", component, opts.Name, pid, err)
	}
	env, err := procStrings(pid, "environ")
	if err != nil {
		return fmt.Errorf("restarting %s of cluster %s: reading the environment of %d: %w", component, opts.Name, pid, err)
	}
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return fmt.Errorf("restarting %s of cluster %s: %w", component, opts.Name, err)
	}
	if err := stopPID(ctx, pid); err != nil {
		return fmt.Errorf("restarting %s of cluster %s: %w", component, opts.Name, err)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	logFile, err := os.OpenFile(filepath.Join(dir, "logs", component+".log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("restarting %s of cluster %s: %w", component, opts.Name, err)
	}
	defer logFile.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir, cmd.Stdout, cmd.Stderr = env, cwd, logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives the test's process group, as kwokctl's do
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("restarting %s of cluster %s: %w", component, opts.Name, err)
	}
	go func() { _ = cmd.Wait() }() // reap it when Stop or Down ends it
	if err := os.WriteFile(pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return fmt.Errorf("restarting %s of cluster %s: %w", component, opts.Name, err)
	}
	c, err := connect(opts)
	if err != nil {
		return err
	}
	return c.waitHealthy(ctx, 2*time.Minute)
}

// procStrings reads a NUL-separated file of /proc/<pid>.
func procStrings(pid int, name string) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}) {
		out = append(out, string(f))
	}
	return out, nil
}
