package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/agentproc"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
	"github.com/kustodian/kustodian/test/timeline"
)

func lockHolder(t *testing.T, e *cluster.Env) string {
	t.Helper()
	l, err := e.Client.CoordinationV1().Leases(e.Namespace).Get(e.Ctx, lock.DefaultGroup.LockName(0), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the lock: %v", err)
	}
	return lock.Holder(l)
}

// policyLockHolder is the holder of the first lock of a policy's only
// group; "" when nobody holds it or it was never made.
func policyLockHolder(t *testing.T, e *cluster.Env, policy string) string {
	t.Helper()
	name := lock.GroupRef{Policy: policy}.LockName(0)
	l, err := e.Client.CoordinationV1().Leases(e.Namespace).Get(e.Ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatalf("reading the lock %s: %v", name, err)
	}
	return lock.Holder(l)
}

func recordTimeline(t *testing.T, e *cluster.Env) *timeline.Timeline {
	t.Helper()
	tl, err := timeline.Record(e.Ctx, e.Client, e.Namespace, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tl.Err(); err != nil {
			t.Errorf("the timeline is incomplete: %v", err)
		}
	})
	return tl
}

// waitingAgent is an agent process on this machine playing a kwok node,
// to wait in the queue behind a real host.
type waitingAgent struct {
	t    *testing.T
	spec agentproc.Spec
	cmd  *exec.Cmd
}

func newWaitingAgent(t *testing.T, e *cluster.Env) *waitingAgent {
	t.Helper()
	node := e.ID + "-waiter"
	if err := cluster.CreateNode(e.Ctx, e.Client, node, nil); err != nil {
		t.Fatal(err)
	}
	w := &waitingAgent{t: t, spec: agentproc.Spec{Binary: filepath.Join(binaries(t), "kustodian"), Kubeconfig: nodecreds.Kubeconfig(e, node),
		Namespace: e.Namespace, Node: node, Dir: t.TempDir(), Extra: []string{"--stay"}}}
	cmd, err := agentproc.Start(w.spec)
	if err != nil {
		t.Fatal(err)
	}
	w.cmd = cmd
	t.Cleanup(func() {
		agentproc.Stop(cmd)
		if t.Failed() {
			b, _ := os.ReadFile(w.spec.LogFile())
			t.Logf("log of the waiting agent:\n%s", b)
		}
	})
	return w
}

func (w *waitingAgent) request() {
	w.t.Helper()
	if err := os.WriteFile(w.spec.RequestFile(), nil, 0o644); err != nil {
		w.t.Fatal(err)
	}
}

func (w *waitingAgent) inProgress() bool {
	_, err := os.Stat(w.spec.InProgressFile())
	return err == nil
}

func (w *waitingAgent) waitInProgress(e *cluster.Env) {
	e.T.Helper()
	e.Eventually("the waiting node's go-ahead", cluster.DefaultTimeout, func(context.Context) error {
		if !w.inProgress() {
			return fmt.Errorf("no in-progress file")
		}
		return nil
	})
}

func nodeUnschedulable(t *testing.T, e *cluster.Env, node string) bool {
	t.Helper()
	n, err := e.Client.CoreV1().Nodes().Get(e.Ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Spec.Unschedulable
}
