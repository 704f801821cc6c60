package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/cluster"
)

// setPaused writes the control ConfigMap.
func setPaused(e *cluster.Env, paused bool, reason string) {
	e.T.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "control", Namespace: e.Namespace},
		Data:       map[string]string{"paused": fmt.Sprint(paused), "reason": reason},
	}
	_, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Update(e.Ctx, cm, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		_, err = e.Client.CoreV1().ConfigMaps(e.Namespace).Create(e.Ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		e.T.Fatal(err)
	}
}

// 8. Pause during a rollout: the holder finishes, nobody else starts until
// the rollout is resumed.
func TestAgentPause(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(3)
	tl := recordTimeline(e)
	agents := []*agentProc{newAgent(t, e, nodes[0]), newAgent(t, e, nodes[1]), newAgent(t, e, nodes[2])}
	agents[0].request("upgrade")
	agents[0].start()
	agents[0].waitInProgress(cluster.DefaultTimeout)
	for _, a := range agents[1:] {
		a.request("upgrade")
		a.start()
		waitRecord(e, a.node, "Waiting", inState(lock.Waiting))
	}

	setPaused(e, true, "incident 42")
	agents[0].finish()
	agents[0].exitsZero()
	for _, a := range agents[1:] {
		waitRecord(e, a.node, "to say the rollout is paused", func(r *lock.Record) error {
			if err := inState(lock.Waiting)(r); err != nil {
				return err
			}
			if r.Message != "waiting: maintenance is paused: incident 42" {
				return fmt.Errorf("message %q", r.Message)
			}
			return nil
		})
	}
	if h := lockHolder(e); h != "" {
		t.Fatalf("%s took the lock while paused", h)
	}

	setPaused(e, false, "")
	finishInTurn(t, e, agents[1:])
	checkExclusive(t, tl, 1)
}

// 9. Bad input: a clear one-line error, a non-zero exit, nothing changed in
// the cluster.
func TestAgentRefusesBadInput(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(1)
	dir := t.TempDir()
	badConfig := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(badConfig, []byte("drain:\n  timout: 5m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		setup func(a *agentProc)
		args  []string
		env   []string
		admin string // why the agent runs with admin credentials
		want  string
	}{
		{name: "unknown config key", args: []string{"--config", badConfig}, want: badConfig + `: unknown key "drain.timout"`},
		{name: "bad duration", env: []string{"KUSTODIAN_DRAIN_TIMEOUT=5 minutes"}, want: `KUSTODIAN_DRAIN_TIMEOUT: "5 minutes" is not a duration`},
		{name: "missing kubeconfig", args: []string{"--kubeconfig", filepath.Join(dir, "nope")}, want: "kubeconfig " + filepath.Join(dir, "nope") + " does not exist"},
		{name: "unreadable request file", setup: func(a *agentProc) {
			if err := os.Mkdir(a.requestFile(), 0o755); err != nil {
				t.Fatal(err)
			}
		}, want: "is not a regular file"},
		{name: "missing namespace", args: []string{"--namespace", "nowhere"}, want: `namespace "nowhere" does not exist: Kustodian is not installed there`},
		{name: "missing namespace, admin credentials", args: []string{"--namespace", "nowhere"}, admin: "only an admin may read namespaces", want: `namespace "nowhere" does not exist`},
		{name: "lock.ttl with a node-bound token", args: []string{"--lock-ttl", "1m"}, want: "lock.ttl is set, but kubeconfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var a *agentProc
			if tc.admin != "" {
				a = newAdminAgent(t, e, nodes[0], tc.admin, tc.args...)
			} else {
				a = newAgent(t, e, nodes[0], tc.args...)
			}
			if tc.setup != nil {
				tc.setup(a)
			} else {
				a.request("upgrade")
			}
			out, err := runOnce(a, tc.env)
			if err == nil {
				t.Fatalf("the agent accepted it; output:\n%s", out)
			}
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if !strings.Contains(lines[len(lines)-1], tc.want) {
				t.Errorf("last line %q, want it to contain %q", lines[len(lines)-1], tc.want)
			}
		})
	}
	// Nothing changed in the cluster.
	leases, err := e.Client.CoordinationV1().Leases(e.Namespace).List(e.Ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(leases.Items) != 0 {
		t.Errorf("bad input left %d Leases behind", len(leases.Items))
	}
	if n := nodeObject(e, nodes[0]); n.Spec.Unschedulable || len(n.Labels[lock.LabelState]) > 0 {
		t.Errorf("bad input changed the node: unschedulable=%v labels=%v", n.Spec.Unschedulable, n.Labels)
	}
}

// runOnce runs the agent in the foreground and returns its output.
func runOnce(a *agentProc, env []string) (string, error) {
	ctx, cancel := context.WithTimeout(a.env.Ctx, cluster.DefaultTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, kustodianBinary(a.t), a.args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
