package integration

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/buildbin"
	"github.com/kustodian/kustodian/test/cluster"
)

// repoFile is a path in the repository, from this test's directory (go
// test runs a package's tests in its directory).
func repoFile(t *testing.T, rel string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", rel))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// The bash example of the original Kustodian README (kept verbatim in
// testdata/original-readme-script.sh) works unchanged against
// the agent, with its hard-coded paths under /var. The test gives the script
// and the agent a private /var (a bind mount in a mount namespace of their
// own) and starts the agent once the request exists, as the path unit does.
func TestReadmeScriptUnchanged(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	e.Deployment("web", 4)
	e.RunningPods("web", 4)
	script := repoFile(t, "test/integration/testdata/original-readme-script.sh")
	varDir := t.TempDir()
	logDir := t.TempDir()
	logPath := filepath.Join(logDir, "agent.log")

	driver := `set -eu
mount --bind "$VARDIR" /var
bash "$SCRIPT" > "$SCRIPTLOG" 2>&1 &
script=$!
until [ -e /var/maintenance-required ]; do sleep 0.05; done
"$KUSTODIAN" agent --config /dev/null --kubeconfig "$KUBECONFIG" --node-name "$NODE" --namespace "$NAMESPACE" \
  --queue-heartbeat 1s --log-format json > "$LOG" 2>&1
wait "$script"
`
	out, err := runWithPrivateVar(e, driver, varDir, script, logDir, logPath, nodes[0])
	if err != nil {
		agentLog, _ := os.ReadFile(logPath)
		t.Fatalf("README script with the agent: %v\n%s\nagent log:\n%s", err, out, agentLog)
	}
	entries, _ := os.ReadDir(varDir)
	for _, en := range entries {
		if strings.HasPrefix(en.Name(), "maintenance-") {
			t.Errorf("%s left in /var", en.Name())
		}
	}
	agentLog, _ := os.ReadFile(logPath)
	for _, want := range []string{`"to":"InMaintenance"`, `"to":"Completing"`, `node is Idle; exiting`} {
		if !strings.Contains(string(agentLog), want) {
			t.Errorf("agent log lacks %s:\n%s", want, agentLog)
		}
	}
	if nodeObject(e, nodes[0]).Spec.Unschedulable {
		t.Error("node still cordoned")
	}
	if h := lockHolder(e); h != "" {
		t.Errorf("lock still held by %s", h)
	}
}

// examples/readme-maintenance.sh hands the node back after a maintenance
// that succeeded, and keeps the request (the node cordoned, the lock held)
// after one that failed.
func TestExampleScriptFailsSafe(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	script := repoFile(t, "examples/readme-maintenance.sh")
	varDir := t.TempDir()
	logDir := t.TempDir()
	logPath := filepath.Join(logDir, "agent.log")
	driver := `set -u
mount --bind "$VARDIR" /var || exit 1
"$KUSTODIAN" agent --config /dev/null --kubeconfig "$KUBECONFIG" --node-name "$NODE" --namespace "$NAMESPACE" \
  --queue-heartbeat 1s --log-format json --stay > "$LOG" 2>&1 &
agent=$!
bash "$SCRIPT" true > "$SCRIPTLOG.1" 2>&1; echo "succeeding maintenance: exit $?"
bash "$SCRIPT" false > "$SCRIPTLOG.2" 2>&1; echo "failing maintenance: exit $?"
[ -e /var/maintenance-required ] && echo "request kept"
kill "$agent"; wait "$agent"
exit 0
`
	out, err := runWithPrivateVar(e, driver, varDir, script, logDir, logPath, nodes[0])
	agentLog, _ := os.ReadFile(logPath)
	if err != nil {
		t.Fatalf("example script with the agent: %v\n%s\nagent log:\n%s", err, out, agentLog)
	}
	for _, want := range []string{"succeeding maintenance: exit 0", "failing maintenance: exit 1", "request kept"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the driver did not say %q:\n%s\nagent log:\n%s", want, out, agentLog)
		}
	}
	if h := lockHolder(e); h != nodes[0] || !nodeObject(e, nodes[0]).Spec.Unschedulable {
		t.Errorf("after the failed maintenance: lock held by %q, node cordoned %v; want the lock kept and the cordon", h, nodeObject(e, nodes[0]).Spec.Unschedulable)
	}
	if n := strings.Count(string(agentLog), `"to":"Completing"`); n != 1 {
		t.Errorf("the agent completed %d maintenances, want 1 (the one that succeeded):\n%s", n, agentLog)
	}
}

// runWithPrivateVar runs a driver script in a mount namespace of its own
// (unshare), with the paths and names it needs in its environment: VARDIR
// (to bind onto /var), SCRIPT, SCRIPTLOG, KUSTODIAN, LOG (the agent's),
// KUBECONFIG, NODE and NAMESPACE.
func runWithPrivateVar(e *cluster.Env, driver, varDir, script, logDir, logPath, node string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(e.Ctx, 2*cluster.DefaultTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--mount", "--propagation", "private", "bash", "-c", driver)
	cmd.Env = append(os.Environ(),
		"VARDIR="+varDir, "SCRIPT="+script, "SCRIPTLOG="+filepath.Join(logDir, "script.log"), "KUSTODIAN="+buildbin.Kustodian(e.T), "LOG="+logPath,
		"KUBECONFIG="+e.Kubeconfig, "NODE="+node, "NAMESPACE="+e.Namespace)
	return cmd.CombinedOutput()
}

// The example script that fails keeps the request: the node stays in
// maintenance, cordoned, with the lock.
func TestFlakyScriptFailureKeepsTheLock(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(1)
	a := newAgent(t, e, nodes[0], "--stay")
	a.start()
	run := func(failPercent string) error {
		cmd := exec.CommandContext(e.Ctx, repoFile(t, "examples/flaky-maintenance.sh"))
		cmd.Env = append(os.Environ(), "REQUEST="+a.requestFile(), "IN_PROGRESS="+a.inProgressFile(),
			"WORK_MS=100", "FAIL_PERCENT="+failPercent)
		out, err := cmd.CombinedOutput()
		t.Logf("flaky-maintenance.sh FAIL_PERCENT=%s: %s", failPercent, out)
		return err
	}
	if err := run("100"); err == nil {
		t.Fatal("the script did not fail with FAIL_PERCENT=100")
	}
	waitRecord(e, nodes[0], "to stay in maintenance", inState(lock.InMaintenance))
	if h := lockHolder(e); h != nodes[0] || !nodeObject(e, nodes[0]).Spec.Unschedulable {
		t.Fatalf("after a failed script: holder %q, cordoned %v", h, nodeObject(e, nodes[0]).Spec.Unschedulable)
	}
	// The operator's fix: remove the request (the next run of the script
	// would wait for the in-progress file to go first).
	a.finish()
	waitRecord(e, nodes[0], "back to Idle", func(r *lock.Record) error {
		if r != nil {
			return os.ErrExist
		}
		return nil
	})
	if err := run("0"); err != nil {
		t.Fatalf("the script failed with FAIL_PERCENT=0: %v", err)
	}
	waitRecord(e, nodes[0], "back to Idle", func(r *lock.Record) error {
		if r != nil {
			return os.ErrExist
		}
		return nil
	})
}
