// Package agentproc starts `kustodian agent` processes that play the agents
// of simulated nodes, each with its own directory for the host files, for
// the integration tests, the demo and the benchmarks.
package agentproc

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// Spec says which node an agent plays and where.
type Spec struct {
	Binary     string // the kustodian binary
	Kubeconfig string
	Namespace  string
	Node       string
	Dir        string // the node's host files and the agent's log live here
	Extra      []string
	Env        []string
}

// RequestFile, InProgressFile and LogFile are the agent's paths.
func (s Spec) RequestFile() string    { return filepath.Join(s.Dir, "maintenance-required") }
func (s Spec) InProgressFile() string { return filepath.Join(s.Dir, "maintenance-in-progress") }
func (s Spec) LogFile() string        { return filepath.Join(s.Dir, "agent.log") }

// StateDir is the agent's --state-dir.
func (s Spec) StateDir() string { return filepath.Join(s.Dir, "state") }

// Prepare creates the agent's directories: the state directory is there
// before the agent starts, as the package's is (the agent refuses a
// --state-dir that is not: a mistyped path).
func (s Spec) Prepare() error { return os.MkdirAll(s.StateDir(), 0o700) }

// RebootSentinel is the agent's reboot sentinel, in its directory.
func (s Spec) RebootSentinel() string { return filepath.Join(s.Dir, "reboot-required") }

// Args are the agent's command-line arguments: fast heartbeats and retries
// suit simulated nodes.
func (s Spec) Args() []string {
	return append([]string{"agent",
		"--config", "/dev/null",
		"--kubeconfig", s.Kubeconfig,
		"--node-name", s.Node,
		"--namespace", s.Namespace,
		"--request-file", s.RequestFile(),
		"--in-progress-file", s.InProgressFile(),
		"--reboot-sentinel", s.RebootSentinel(),
		"--state-dir", s.StateDir(),
		"--queue-heartbeat", "1s",
		"--drain-evict-error-retry-delay", "300ms",
		// Not the kubelet kubeconfig of the machine the tests run on.
		"--drain-kubelet-kubeconfig", "none",
		"--log-format", "json",
		// Many agents share the host: a test that wants the endpoint
		// gives each its own address.
		"--metrics-listen", "",
	}, s.Extra...)
}

// Start starts the agent with its output appended to LogFile.
func Start(s Spec) (*exec.Cmd, error) {
	if err := s.Prepare(); err != nil {
		return nil, err
	}
	log, err := os.OpenFile(s.LogFile(), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close() // the child has its own copy
	cmd := exec.Command(s.Binary, s.Args()...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET=")
	cmd.Env = append(cmd.Env, s.Env...)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the agent of %s: %w", s.Node, err)
	}
	return cmd, nil
}

// Stop sends SIGTERM to the agent (by its PID) and waits for it.
func Stop(cmd *exec.Cmd) {
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
}

// RSS is the resident memory of a process in bytes (0 when it is gone).
func RSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/statm", pid))
	if err != nil {
		return 0
	}
	var size, resident int64
	if _, err := fmt.Sscan(string(b), &size, &resident); err != nil {
		return 0
	}
	return resident * int64(os.Getpagesize())
}
