package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/agentproc"
	"github.com/kustodian/kustodian/test/buildbin"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
	"github.com/kustodian/kustodian/test/timeline"
)

// kustodianBinary is the node binary, built once per test process.
func kustodianBinary(t *testing.T) string { return buildbin.Kustodian(t) }

// agentProc is one `kustodian agent` process playing the agent of one node,
// with its own directory for the host files.
type agentProc struct {
	t       *testing.T
	env     *cluster.Env
	node    string
	dir     string
	args    []string
	logPath string
	spec    agentproc.Spec
	notify  *notifySocket // nil: the agent runs as if not under systemd

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// newAgent prepares the agent of node as a fleet runs it: with the node's
// own kubeconfig (kustodian-ctl kubeconfig: a token bound to its Node) in an
// installation with the admission policies (kustodian-ctl install). Extra
// arguments may name another --kubeconfig. Start it with start().
func newAgent(t *testing.T, e *cluster.Env, node string, extra ...string) *agentProc {
	t.Helper()
	kubeconfig := e.Kubeconfig // overridden by the --kubeconfig in extra
	if !slices.Contains(extra, "--kubeconfig") {
		kubeconfig = nodecreds.Kubeconfig(e, node)
	}
	return prepareAgent(t, e, node, kubeconfig, extra...)
}

// startRequesting starts an agent on each node with a maintenance
// requested, in the order of nodes.
func startRequesting(t *testing.T, e *cluster.Env, nodes []string) []*agentProc {
	t.Helper()
	var agents []*agentProc
	for _, n := range nodes {
		a := newAgent(t, e, n)
		a.request("kernel")
		a.start()
		agents = append(agents, a)
	}
	return agents
}

// newAdminAgent prepares an agent with the admin's kubeconfig, for the
// tests of what only agents without a node-bound token do; why says which.
func newAdminAgent(t *testing.T, e *cluster.Env, node, why string, extra ...string) *agentProc {
	t.Helper()
	t.Logf("the agent of %s runs with admin credentials: %s", node, why)
	return prepareAgent(t, e, node, e.Kubeconfig, extra...)
}

func prepareAgent(t *testing.T, e *cluster.Env, node, kubeconfig string, extra ...string) *agentProc {
	t.Helper()
	spec := agentproc.Spec{Binary: kustodianBinary(t), Kubeconfig: kubeconfig, Namespace: e.Namespace,
		Node: node, Dir: t.TempDir(), Extra: extra}
	if err := spec.Prepare(); err != nil {
		t.Fatal(err)
	}
	p := &agentProc{t: t, env: e, node: node, dir: spec.Dir, args: spec.Args(), logPath: spec.LogFile(), spec: spec}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			if b, err := os.ReadFile(p.logPath); err == nil {
				t.Logf("log of the agent of %s:\n%s", node, b)
			}
		}
	})
	return p
}

func (p *agentProc) requestFile() string    { return p.spec.RequestFile() }
func (p *agentProc) inProgressFile() string { return p.spec.InProgressFile() }

// start starts the agent process (again, after a kill).
func (p *agentProc) start() {
	p.t.Helper()
	spec := p.spec
	if p.notify != nil {
		spec.Env = []string{"NOTIFY_SOCKET=" + p.notify.path}
	}
	cmd, err := agentproc.Start(spec)
	if err != nil {
		p.t.Fatal(err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done, p.err = cmd, done, nil
	p.mu.Unlock()
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
}

// kill sends SIGKILL to the agent (by its PID) and waits for it to be gone.
func (p *agentProc) kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-done
}

// waitExit waits for the agent to exit and returns its exit code.
func (p *agentProc) waitExit(timeout time.Duration) int {
	p.t.Helper()
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
	case <-time.After(timeout):
		p.t.Fatalf("the agent of %s did not exit within %s", p.node, timeout)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		p.t.Fatalf("agent of %s: %v", p.node, p.err)
	}
	return 0
}

// exitsZero waits for the agent to exit and fails the test unless it exits 0.
func (p *agentProc) exitsZero() {
	p.t.Helper()
	if code := p.waitExit(cluster.DefaultTimeout); code != 0 {
		p.t.Fatalf("the agent of %s exited %d, want 0", p.node, code)
	}
}

// completes plays the end of a successful script: the request is removed,
// and the path-activated agent gives the node back and exits 0.
func (p *agentProc) completes() {
	p.t.Helper()
	p.finish()
	p.exitsZero()
}

func (p *agentProc) running() bool {
	started, ended := p.lifecycle()
	return started && !ended
}

// ended reports whether the agent was started and has ended.
func (p *agentProc) ended() bool {
	started, ended := p.lifecycle()
	return started && ended
}

func (p *agentProc) lifecycle() (started, ended bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return false, false
	}
	select {
	case <-p.done:
		return true, true
	default:
		return true, false
	}
}

// request creates the request file, as a maintenance script does.
func (p *agentProc) request(reason string) {
	p.t.Helper()
	if err := os.WriteFile(p.requestFile(), []byte(reason+"\n"), 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// finish removes the request file: the script is done.
func (p *agentProc) finish() {
	p.t.Helper()
	if err := p.removeRequest(); err != nil {
		p.t.Fatal(err)
	}
}

// removeRequest is finish for a goroutine, which must not call t.Fatal.
func (p *agentProc) removeRequest() error { return os.Remove(p.requestFile()) }

func (p *agentProc) inProgress() bool {
	_, err := os.Stat(p.inProgressFile())
	return err == nil
}

func (p *agentProc) logText() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// waitInProgress waits for the agent to create the in-progress file.
func (p *agentProc) waitInProgress(timeout time.Duration) {
	p.t.Helper()
	p.env.Eventually(p.node+" to be in maintenance (in-progress file)", timeout, func(ctx context.Context) error {
		if !p.inProgress() {
			return fmt.Errorf("no %s; agent running: %v", p.inProgressFile(), p.running())
		}
		return nil
	})
}

// record reads a node's record; nil when it has none. Any other error of
// the API server fails the test: it is no answer. Call it from the test's
// goroutine.
func record(e *cluster.Env, node string) *lock.Record {
	e.T.Helper()
	l, err := e.Client.CoordinationV1().Leases(e.Namespace).Get(e.Ctx, lock.RecordName(node), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.T.Fatalf("reading the record of %s: %v", node, err)
	}
	r := lock.RecordFromLease(l)
	return &r
}

// lockHolder is the holder of the default lock; "" when it is free or
// absent. Any other error of the API server fails the test.
func lockHolder(e *cluster.Env) string {
	e.T.Helper()
	return groupLockHolder(e, lock.DefaultGroup)
}

// groupLockHolder is the holder of the first lock of group g.
func groupLockHolder(e *cluster.Env, g lock.GroupRef) string {
	e.T.Helper()
	l, err := e.Client.CoordinationV1().Leases(e.Namespace).Get(e.Ctx, g.LockName(0), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		e.T.Fatalf("reading lock %s: %v", g.LockName(0), err)
	}
	return lock.Holder(l)
}

// waitRecord waits until node's record satisfies cond.
func waitRecord(e *cluster.Env, node, what string, cond func(r *lock.Record) error) {
	e.T.Helper()
	e.Eventually(node+" "+what, cluster.DefaultTimeout, func(ctx context.Context) error {
		return cond(record(e, node))
	})
}

func inState(state lock.State) func(r *lock.Record) error {
	return func(r *lock.Record) error {
		if r == nil {
			return errors.New("no record")
		}
		if r.State != state {
			return fmt.Errorf("state %s (%s), want %s", r.State, r.Message, state)
		}
		return nil
	}
}

// inStateSaying is inState whose message also contains substr.
func inStateSaying(state lock.State, substr string) func(r *lock.Record) error {
	return func(r *lock.Record) error {
		if err := inState(state)(r); err != nil {
			return err
		}
		if !strings.Contains(r.Message, substr) {
			return fmt.Errorf("message %q does not say %q", r.Message, substr)
		}
		return nil
	}
}

func nodeObject(e *cluster.Env, name string) *corev1.Node {
	e.T.Helper()
	n, err := e.Client.CoreV1().Nodes().Get(e.Ctx, name, metav1.GetOptions{})
	if err != nil {
		e.T.Fatalf("reading node %s: %v", name, err)
	}
	return n
}

// recordTimeline records the node records of the test's namespace.
func recordTimeline(e *cluster.Env) *timeline.Timeline {
	e.T.Helper()
	tl, err := timeline.Record(e.Ctx, e.Client, e.Namespace, nil)
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() {
		if err := tl.Err(); err != nil {
			e.T.Errorf("the timeline is incomplete: %v", err)
		}
	})
	return tl
}

// checkExclusive fails the test if more than slots nodes were ever in
// maintenance at once.
func checkExclusive(t *testing.T, tl *timeline.Timeline, slots int) {
	t.Helper()
	if err := tl.CheckExclusive(slots); err != nil {
		t.Fatalf("%v; timeline:\n%s", err, tl)
	}
}

// notifySocket receives what the agent sends to systemd (sd_notify), as
// systemd would: READY=1, STATUS=..., STOPPING=1.
type notifySocket struct {
	path string
	mu   sync.Mutex
	msgs []string
}

func listenNotify(t *testing.T) *notifySocket {
	t.Helper()
	n := &notifySocket{path: filepath.Join(t.TempDir(), "notify.sock")}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: n.path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 4096)
		for {
			k, err := conn.Read(buf)
			if err != nil {
				return
			}
			n.mu.Lock()
			n.msgs = append(n.msgs, string(buf[:k]))
			n.mu.Unlock()
		}
	}()
	return n
}

// statuses are the STATUS= lines received so far.
func (n *notifySocket) statuses() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for _, m := range n.msgs {
		for _, line := range strings.Split(m, "\n") {
			if s, ok := strings.CutPrefix(line, "STATUS="); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

// sent reports whether a message with this prefix was received.
func (n *notifySocket) sent(prefix string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, m := range n.msgs {
		for _, line := range strings.Split(m, "\n") {
			if strings.HasPrefix(line, prefix) {
				return true
			}
		}
	}
	return false
}

// waitStatus waits for a STATUS line containing want.
func (n *notifySocket) waitStatus(e *cluster.Env, want string) {
	e.T.Helper()
	e.Eventually("STATUS containing "+strconv.Quote(want), cluster.DefaultTimeout, func(context.Context) error {
		for _, s := range n.statuses() {
			if strings.Contains(s, want) {
				return nil
			}
		}
		return fmt.Errorf("STATUS lines so far: %q", n.statuses())
	})
}

// eventSays waits for exactly one Event with reason about node whose
// message has substr.
func eventSays(e *cluster.Env, node, reason, substr string) {
	e.T.Helper()
	e.Eventually("a "+reason+" Event about "+node+" saying "+substr, cluster.DefaultTimeout, func(ctx context.Context) error {
		evs, err := e.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + node + ",reason=" + reason})
		if err != nil {
			return err
		}
		if len(evs.Items) != 1 || !strings.Contains(evs.Items[0].Message, substr) {
			var msgs []string
			for _, ev := range evs.Items {
				msgs = append(msgs, ev.Message)
			}
			return fmt.Errorf("%d Events: %q", len(evs.Items), msgs)
		}
		return nil
	})
}
