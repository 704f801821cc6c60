package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/cluster"
)

// runJob runs `kustodian run` for the agent's node, with its paths.
func runJob(t *testing.T, a *agentProc, args ...string) *exec.Cmd {
	t.Helper()
	full := append([]string{"run", "--config", "/dev/null", "--request-file", a.requestFile(),
		"--in-progress-file", a.inProgressFile(), "--state-dir", a.spec.StateDir(),
		"--kubeconfig", a.spec.Kubeconfig, "--namespace", a.spec.Namespace, "--node-name", a.node}, args...)
	return exec.CommandContext(a.env.Ctx, kustodianBinary(t), full...)
}

// Managed jobs (without systemd: the agent runs them as children): a job
// that succeeds completes the maintenance, one that fails leaves the node
// Failed with the lock held; --wait exits with the job's code.
func TestManagedJobs(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(1)
	a := newAgent(t, e, nodes[0])

	ok := runJob(t, a, "--id", "ok-1", "--wait", "--", "sh", "-c", "echo patching; echo done")
	var okOut strings.Builder
	ok.Stdout, ok.Stderr = &okOut, &okOut
	if err := ok.Start(); err != nil {
		t.Fatal(err)
	}
	e.Eventually("the request of the job", cluster.DefaultTimeout, func(context.Context) error {
		if _, err := os.Stat(a.requestFile()); err != nil {
			return err
		}
		return nil
	})
	a.start() // as the path unit would
	if err := ok.Wait(); err != nil {
		t.Fatalf("kustodian run --wait: %v\n%s", err, okOut.String())
	}
	a.exitsZero()
	if !strings.Contains(okOut.String(), "job ok-1 (run 1): succeeded, exit 0") {
		t.Errorf("run --wait said:\n%s", okOut.String())
	}
	if h := lockHolder(e); h != "" {
		t.Errorf("lock held by %q after a successful job", h)
	}
	// Run again with the same ID (a re-run playbook): reported, not redone.
	again, err := runJob(t, a, "--id", "ok-1", "--", "sh", "-c", "echo patching; echo done").CombinedOutput()
	if err != nil || !strings.Contains(string(again), "job ok-1 (run 1): succeeded") {
		t.Errorf("the same job again: %v\n%s", err, again)
	}
	if _, err := os.Stat(a.requestFile()); err == nil {
		t.Error("the same job again requested maintenance again")
	}
	if out, err := runJob(t, a, "--id", "ok-1", "--", "true").CombinedOutput(); err == nil || !strings.Contains(string(out), "exists already with another command") {
		t.Errorf("the same ID with another command: %v\n%s", err, out)
	}

	badJob := []string{"--id", "bad-1", "--", "sh", "-c", "echo 'E: broken packages' >&2; exit 3"}
	if out, err := runJob(t, a, badJob...).CombinedOutput(); err != nil {
		t.Fatalf("kustodian run: %v\n%s", err, out)
	}
	var exit *exec.ExitError
	if out, err := runJob(t, a, badJob...).CombinedOutput(); !errors.As(err, &exit) || exit.ExitCode() != 75 || !strings.Contains(string(out), "job bad-1 (run 0): pending") {
		t.Errorf("a pending job asked again: %v\n%s", err, out)
	}
	a.start()
	waitRecord(e, nodes[0], "Failed by its job", inStateSaying(lock.Failed, "job bad-1 (run 1): failed, exit 3: E: broken packages"))
	eventSays(e, nodes[0], "MaintenanceFailed", "job bad-1 (run 1): failed, exit 3: E: broken packages")
	if h := lockHolder(e); h != nodes[0] || !nodeObject(e, nodes[0]).Spec.Unschedulable {
		t.Errorf("after a failed job: holder %q, cordoned %v", h, nodeObject(e, nodes[0]).Spec.Unschedulable)
	}
	if out, err := runJob(t, a, badJob...).CombinedOutput(); !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Errorf("a failed job asked again: %v, want exit 3\n%s", err, out)
	}
	wait := runJob(t, a, "--id", "another", "--", "true")
	if out, err := wait.CombinedOutput(); err == nil || !strings.Contains(string(out), "already requested") {
		t.Errorf("a second job while one failed: %v %s", err, out)
	}
	// The operator repairs the node and withdraws the request.
	a.completes()
	// The failed job is history: a raw-protocol request afterwards is not
	// taken for it.
	a.request("by hand")
	a.start()
	a.waitInProgress(cluster.DefaultTimeout)
	waitRecord(e, nodes[0], "InMaintenance for the raw request", inState(lock.InMaintenance))
	a.completes()
}

// A job waiting behind a node whose maintenance Failed says so (exit 76)
// instead of "not done yet": automation stops waiting for it.
func TestJobBlockedBehindAFailedNode(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	a, b := newAgent(t, e, nodes[0]), newAgent(t, e, nodes[1], "--stay")
	if out, err := runJob(t, a, "--id", "bad", "--", "sh", "-c", "echo 'E: broken' >&2; exit 3").CombinedOutput(); err != nil {
		t.Fatalf("kustodian run: %v\n%s", err, out)
	}
	a.start()
	waitRecord(e, nodes[0], "Failed by its job", inState(lock.Failed))
	job := []string{"--id", "next", "--", "true"}
	if out, err := runJob(t, b, job...).CombinedOutput(); err != nil {
		t.Fatalf("kustodian run: %v\n%s", err, out)
	}
	b.start()
	waitRecord(e, nodes[1], "Waiting", inState(lock.Waiting))
	var exit *exec.ExitError
	out, err := runJob(t, b, job...).CombinedOutput()
	if !errors.As(err, &exit) || exit.ExitCode() != 76 || !strings.Contains(string(out), "blocked: "+nodes[0]+" holds lock-default-0 and Failed") {
		t.Errorf("a job behind a Failed node: %v\n%s", err, out)
	}
	// The admin releases the failed node: the job goes ahead.
	mustCtl(t, e, "release", nodes[0])
	e.Eventually("the job to succeed", cluster.DefaultTimeout, func(context.Context) error {
		out, err := runJob(t, b, job...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
}

// kustodian reboot refuses unless this node is in maintenance and holds
// the lock: it never reboots a node that is not safely out of the cluster.
func TestRebootRefusesOutsideMaintenance(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(1)
	a := newAgent(t, e, nodes[0])
	reboot := func() string {
		t.Helper()
		args := append([]string{"reboot"}, a.args[1:]...) // the agent's flags
		out, err := exec.CommandContext(e.Ctx, kustodianBinary(t), args...).CombinedOutput()
		if err == nil {
			t.Fatalf("kustodian reboot accepted:\n%s", out)
		}
		return string(out)
	}
	if out := reboot(); !strings.Contains(out, "refusing to reboot") || !strings.Contains(out, "is not in maintenance") {
		t.Errorf("not in maintenance: %s", out)
	}
	if err := os.WriteFile(a.inProgressFile(), nil, 0o644); err != nil { // a stray file, no lock
		t.Fatal(err)
	}
	if out := reboot(); !strings.Contains(out, "does not hold a maintenance lock") {
		t.Errorf("in-progress file without the lock: %s", out)
	}
}
