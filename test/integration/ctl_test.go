package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/yaml"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/status"
	"github.com/kustodian/kustodian/test/buildbin"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// ctlBinary is kustodian-ctl, built once per test process.
func ctlBinary(t *testing.T) string { return buildbin.Ctl(t) }

// ctl runs kustodian-ctl against the test's namespace with admin credentials.
func ctl(t *testing.T, e *cluster.Env, args ...string) (string, error) {
	t.Helper()
	return nodecreds.CtlFor(e).Run(e.Ctx, args...)
}

func mustCtl(t *testing.T, e *cluster.Env, args ...string) string {
	t.Helper()
	out, err := ctl(t, e, args...)
	if err != nil {
		t.Fatalf("kustodian-ctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// normalize makes a table comparable with a golden file: the test's ID and
// ages vary from run to run.
func normalize(e *cluster.Env, s string) string {
	s = strings.ReplaceAll(s, e.ID, "ID")
	s = regexp.MustCompile(`\b\d+(\.\d+)?(ms|s|m|h|d)(\d+(\.\d+)?(ms|s))?\b`).ReplaceAllString(s, "AGE")
	s = regexp.MustCompile(`/tmp/\S+/maintenance-required`).ReplaceAllString(s, "REQUEST")
	s = regexp.MustCompile(`\b[0-9a-f]{12}\b`).ReplaceAllString(s, "REQUEST-ID")
	s = regexp.MustCompile(` +`).ReplaceAllString(s, " ")
	return s
}

func goldenFile(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if os.Getenv("UPDATE_GOLDEN") != "" {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (UPDATE_GOLDEN=1 writes it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from %s:\n--- got\n%s--- want\n%s", name, path, got, want)
	}
}

// A rolling maintenance in progress, seen through every command and format.
func TestCtlDuringRollout(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(4) // nodes[3] stays Idle
	agents := []*agentProc{newAgent(t, e, nodes[0]), newAgent(t, e, nodes[1]), newAgent(t, e, nodes[2])}
	agents[0].request("kernel 6.1")
	agents[0].start()
	agents[0].waitInProgress(cluster.DefaultTimeout)
	waitRecord(e, nodes[0], "InMaintenance", inState(lock.InMaintenance))
	for _, a := range agents[1:] {
		a.request("kernel 6.1")
		a.start()
		waitRecord(e, a.node, "Waiting", inStateSaying(lock.Waiting, "position"))
	}
	// Both waiting nodes have settled on their positions: each as it saw
	// the queue on joining (docs/agent.md).
	waitRecord(e, nodes[1], "first in line", func(r *lock.Record) error {
		if r == nil || !strings.HasPrefix(r.Message, "waiting: position 1 of 1 on joining") {
			return fmt.Errorf("record %+v", r)
		}
		return nil
	})
	waitRecord(e, nodes[2], "second in line", func(r *lock.Record) error {
		if r == nil || !strings.HasPrefix(r.Message, "waiting: position 2 of 2 on joining") {
			return fmt.Errorf("record %+v", r)
		}
		return nil
	})

	goldenFile(t, "ctl-status", normalize(e, mustCtl(t, e, "status")))
	goldenFile(t, "ctl-queue", normalize(e, mustCtl(t, e, "queue")))
	wide := mustCtl(t, e, "status", "-o", "wide", nodes[0], nodes[1])
	goldenFile(t, "ctl-status-wide", normalize(e, wide))

	var s status.MaintenanceStatus
	if err := json.Unmarshal([]byte(mustCtl(t, e, "status", "-o", "json")), &s); err != nil {
		t.Fatal(err)
	}
	if s.APIVersion != "kustodian.io/v1alpha1" || len(s.Locks) != 1 || s.Locks[0].Holder != nodes[0] || len(s.Nodes) != 3 {
		t.Fatalf("status -o json: %+v", s)
	}
	for i, n := range s.Nodes {
		wantState, wantPos := lock.Waiting, i
		if i == 0 {
			wantState = lock.InMaintenance
		}
		if n.Name != nodes[i] || n.State != wantState || n.QueuePosition != wantPos || !n.Live || n.HeartbeatAge == nil || n.RequestID == "" {
			t.Errorf("node %d: %+v, want %s %s at %d", i, n, nodes[i], wantState, wantPos)
		}
	}
	var y status.MaintenanceStatus
	if err := yaml.Unmarshal([]byte(mustCtl(t, e, "status", "-o", "yaml")), &y); err != nil || len(y.Nodes) != 3 {
		t.Fatalf("status -o yaml: %v %+v", err, y)
	}
	var q struct {
		Items []struct {
			Position int
			Node     string
			Live     bool
		}
	}
	if err := json.Unmarshal([]byte(mustCtl(t, e, "queue", "-o", "json")), &q); err != nil {
		t.Fatal(err)
	}
	if len(q.Items) != 2 || q.Items[0].Node != nodes[1] || q.Items[1].Node != nodes[2] || q.Items[0].Position != 1 || !q.Items[1].Live {
		t.Errorf("queue -o json: %+v", q)
	}
	if all := mustCtl(t, e, "status", "--all"); !regexp.MustCompile(nodes[3] + ` +Idle`).MatchString(all) {
		t.Errorf("status --all does not list the idle %s:\n%s", nodes[3], all)
	}

	// pause / resume through the control ConfigMap.
	if out := mustCtl(t, e, "pause", "--reason", "incident 7"); !strings.Contains(out, "paused") {
		t.Errorf("pause said %q", out)
	}
	if out := mustCtl(t, e, "status"); !strings.Contains(out, "Paused:        yes: incident 7") {
		t.Errorf("status after pause:\n%s", out)
	}
	for _, a := range agents[1:] {
		waitRecord(e, a.node, "to see the pause", func(r *lock.Record) error {
			if r == nil || r.Message != "waiting: maintenance is paused: incident 7" {
				return fmt.Errorf("record %+v", r)
			}
			return nil
		})
	}
	mustCtl(t, e, "resume")
	if out := mustCtl(t, e, "status"); !strings.Contains(out, "Paused:        no") {
		t.Errorf("status after resume:\n%s", out)
	}

	// --watch sees the handoff within a second of the release.
	watch := exec.CommandContext(e.Ctx, ctlBinary(t), "--kubeconfig", e.Kubeconfig, "-n", e.Namespace, "status", "--watch")
	stdout, err := watch.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = watch.Process.Kill(); _ = watch.Wait() })
	var mu sync.Mutex
	var lines []string
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			mu.Lock()
			lines = append(lines, sc.Text())
			mu.Unlock()
		}
	}()
	saw := func(substr string) error {
		mu.Lock()
		defer mu.Unlock()
		for _, l := range lines {
			if strings.Contains(l, substr) {
				return nil
			}
		}
		return fmt.Errorf("not among %d lines yet", len(lines))
	}
	e.Eventually("the watch's first table", cluster.DefaultTimeout, func(context.Context) error { return saw("NODE") })
	released := watchRelease(t, e, nodes[0])
	agents[0].completes()
	at := <-released
	if err := cluster.Eventually(e.Ctx, time.Second, func(context.Context) error {
		return saw(nodes[1] + "  Draining")
	}); err != nil {
		mu.Lock()
		t.Fatalf("status --watch did not show %s Draining within 1s of the release at %s: %v\n%s", nodes[1], at.Format("15:04:05.000"), err, strings.Join(lines, "\n"))
	}
	// Not on a terminal: a plain progress line after the changes, with the
	// first node done.
	e.Eventually("the watch's progress line", cluster.DefaultTimeout, func(context.Context) error {
		return saw("  progress: 1/3 done, 1 in maintenance, 1 waiting, 0 failed; elapsed ")
	})
	finishInTurn(t, e, agents[1:])
}

// watchRelease reports when the lock stops being held by node.
func watchRelease(t *testing.T, e *cluster.Env, node string) <-chan time.Time {
	t.Helper()
	w, err := e.Client.CoordinationV1().Leases(e.Namespace).Watch(e.Ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", lock.DefaultGroup.LockName(0)).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	c := make(chan time.Time, 1)
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if l, ok := ev.Object.(*coordv1.Lease); ok && lock.Holder(l) != node {
				c <- time.Now()
				return
			}
		}
	}()
	return c
}

// release of a failed node lets the next node proceed; the failed node
// stays cordoned and does not take the lock again for the same request.
func TestCtlReleaseFailedNode(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	failed := newAgent(t, e, nodes[0], "--stay")
	next := newAgent(t, e, nodes[1])
	failed.request("upgrade")
	failed.start()
	failed.waitInProgress(cluster.DefaultTimeout) // ...and its script fails: the request stays
	next.request("upgrade")
	next.start()
	waitRecord(e, nodes[1], "Waiting", inState(lock.Waiting))

	if out, err := ctl(t, e, "release", nodes[1]); err == nil || !strings.Contains(out, "holds no lock") {
		t.Errorf("release of a node that holds nothing: %v %q", err, out)
	}
	out := mustCtl(t, e, "release", nodes[0])
	for _, want := range []string{"released lock-default-0", "stays cordoned", "records Failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("release output lacks %q:\n%s", want, out)
		}
	}
	next.waitInProgress(cluster.DefaultTimeout)
	waitRecord(e, nodes[0], "Failed after the release", inStateSaying(lock.Failed, "released by an admin"))
	eventSays(e, nodes[0], "MaintenanceFailed", "released by an admin")
	if failed.inProgress() {
		t.Error("the released node's script still has the go-ahead")
	}
	if !nodeObject(e, nodes[0]).Spec.Unschedulable {
		t.Error("the released node was uncordoned")
	}
	next.completes()
	// The lock is free and nobody waits: the released node must not take it
	// again for the same request. Its agent has reconciled since (heartbeats).
	freed := time.Now()
	waitRecord(e, nodes[0], "to have looked again after the lock was freed", func(r *lock.Record) error {
		if r == nil || r.Heartbeat.Before(freed.Add(2*time.Second)) {
			return fmt.Errorf("record %+v", r)
		}
		return nil
	})
	if h := lockHolder(e); h != "" {
		t.Fatalf("lock taken again by %q for a released request", h)
	}
	// Repaired: the request is removed and the node comes back.
	failed.finish()
	waitRecord(e, nodes[0], "back to Idle", func(r *lock.Record) error {
		if r != nil {
			return fmt.Errorf("state %s", r.State)
		}
		return nil
	})
	if nodeObject(e, nodes[0]).Spec.Unschedulable {
		t.Error("the repaired node is still cordoned")
	}
}

// The errors a user will meet: one line each, a non-zero exit.
func TestCtlErrors(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	e.Nodes(1)
	forbidden := restrictedKubeconfig(t, e)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"namespace missing", []string{"--kubeconfig", e.Kubeconfig, "-n", "no-such-ns", "status"}, "Kustodian is not installed in namespace no-such-ns"},
		{"unknown node", []string{"--kubeconfig", e.Kubeconfig, "-n", e.Namespace, "status", "no-such-node"}, `node "no-such-node" not found`},
		{"release unknown node", []string{"--kubeconfig", e.Kubeconfig, "-n", e.Namespace, "release", "no-such-node"}, `node "no-such-node" not found`},
		{"API unreachable", []string{"--kubeconfig", e.Kubeconfig, "--server", "https://127.0.0.1:1", "-n", e.Namespace, "status"}, "cannot reach the API server"},
		{"RBAC forbidden", []string{"--kubeconfig", forbidden, "-n", e.Namespace, "status"}, "forbidden: your credentials may not list leases.coordination.k8s.io in namespace " + e.Namespace},
		{"bad output", []string{"--kubeconfig", e.Kubeconfig, "-n", e.Namespace, "status", "-o", "xml"}, `unknown output format "xml"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := exec.CommandContext(e.Ctx, ctlBinary(t), tc.args...).CombinedOutput()
			if err == nil {
				t.Fatalf("exit 0:\n%s", out)
			}
			text := strings.TrimSpace(string(out))
			if strings.Contains(text, "\n") || !strings.Contains(text, tc.want) {
				t.Errorf("output %q, want one line containing %q", text, tc.want)
			}
		})
	}
}
