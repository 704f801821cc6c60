package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// recordedPIDs reads the pid files kwokctl's binary runtime keeps for each
// component under <cluster>/pids.
func recordedPIDs(dir string) []int {
	files, _ := filepath.Glob(filepath.Join(dir, "pids", "*.pid"))
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 1 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// stopPID waits for a process to exit, sending SIGTERM and then SIGKILL if it
// outlives a grace period.
func stopPID(ctx context.Context, pid int) error {
	alive := func() bool { return syscall.Kill(pid, 0) == nil && !isZombie(pid) }
	if !alive() {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	gone := func(ctx context.Context) (bool, error) { return !alive(), nil }
	if wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, gone) == nil {
		return nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 5*time.Second, true, gone); err != nil {
		return fmt.Errorf("process %d did not exit after SIGKILL", pid)
	}
	return nil
}

func isZombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}

func portFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("port 127.0.0.1:%d is taken by another process; stop it or choose another port", port)
	}
	return l.Close()
}
