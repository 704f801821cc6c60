package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/kustodian/kustodian/test/buildbin"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/dist"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// rolloutAgent starts the agent of node with rollouts enabled, trusting
// key.
func rolloutAgent(t *testing.T, e *cluster.Env, node string, key nodecreds.RolloutKey) *agentProc {
	t.Helper()
	a := newAgent(t, e, node, "--rollouts-enabled", "--rollouts-trusted-keys", key.Trusted)
	a.start()
	return a
}

// rolloutAgents starts the agents of nodes with rollouts enabled, trusting
// key, by node.
func rolloutAgents(t *testing.T, e *cluster.Env, nodes []string, key nodecreds.RolloutKey) map[string]*agentProc {
	t.Helper()
	agents := map[string]*agentProc{}
	for _, n := range nodes {
		agents[n] = rolloutAgent(t, e, n, key)
	}
	return agents
}

// ran is what the test's scripts left in the agent's state directory: one
// line per run (the scripts run in <state>/rollouts/<name>-<revision>).
func (p *agentProc) ran(what string) []string {
	b, err := os.ReadFile(filepath.Join(p.spec.StateDir(), what))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		p.t.Fatal(err)
	}
	return strings.Fields(string(b))
}

func writeScript(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "script.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func dynamicClient(t *testing.T, e *cluster.Env) dynamic.Interface {
	t.Helper()
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

// getRollout reads a rollout as the API server has it; an error fails
// the test.
func getRollout(e *cluster.Env, dyn dynamic.Interface, name string) *rollout.MaintenanceRollout {
	e.T.Helper()
	u, err := dyn.Resource(rollout.GVR).Namespace(e.Namespace).Get(e.Ctx, name, metav1.GetOptions{})
	if err != nil {
		e.T.Fatalf("reading maintenancerollout %s: %v", name, err)
	}
	r, err := rollout.FromUnstructured(u)
	if err != nil {
		e.T.Fatal(err)
	}
	return r
}

// entries are a rollout's entries by node, for its current revision, of
// the nodes that took it: a deferral (a node whose agent came after the
// canary took its place) is no take.
func entries(r *rollout.MaintenanceRollout) map[string]rollout.NodeStatus {
	rev := rollout.Revision(r.Namespace, r.Name, r.Spec)
	out := map[string]rollout.NodeStatus{}
	for _, e := range r.Status.Nodes {
		if e.Revision == rev && e.State != rollout.Deferred {
			out[e.Name] = e
		}
	}
	return out
}

// waitEntries waits until the rollout's entries satisfy cond.
func waitEntries(e *cluster.Env, dyn dynamic.Interface, name, what string, cond func(map[string]rollout.NodeStatus) error) {
	e.T.Helper()
	e.Eventually(what, 2*cluster.DefaultTimeout, func(context.Context) error {
		return cond(entries(getRollout(e, dyn, name)))
	})
}

func inStates(want map[string]string) func(map[string]rollout.NodeStatus) error {
	return func(got map[string]rollout.NodeStatus) error {
		for node, state := range want {
			if got[node].State != state {
				return fmt.Errorf("node %s is %q (%s), want %s", node, got[node].State, got[node].Message, state)
			}
		}
		return nil
	}
}

// A rollout over five node-scoped agents: one node first, then, once an
// admin promotes it, the other four one at a time through the queue; a
// node created after the rollout began runs it too. Each host runs it
// exactly once (what the scripts left says so, not the agents), no other
// node requested maintenance before the promotion (the records the API
// server kept say so), and never two nodes were in maintenance at once.
func TestRolloutStagesPromotionAndNewNodes(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(5)
	nodecreds.Install(e, e.Namespace)
	tl := recordTimeline(e)
	key := nodecreds.NewRolloutKey(t)
	agents := rolloutAgents(t, e, nodes, key)
	script := writeScript(t, "echo run >> ../../ran\necho patched\n")
	ctl := nodecreds.CtlFor(e)
	if out, err := ctl.Run(e.Ctx, "rollout", "create", "fix", "--script", script, "--key", key.Private); err != nil {
		t.Fatalf("rollout create: %v\n%s", err, out)
	}
	dyn := dynamicClient(t, e)
	var canary string
	waitEntries(e, dyn, "fix", "a canary that succeeded", func(got map[string]rollout.NodeStatus) error {
		if len(got) != 1 {
			return fmt.Errorf("%d entries", len(got))
		}
		for n, en := range got {
			if en.State != rollout.Succeeded {
				return fmt.Errorf("%s is %s", n, en.State)
			}
			canary = n
		}
		return nil
	})
	e.Eventually("the rollout awaiting its promotion", cluster.DefaultTimeout, func(context.Context) error {
		out, err := ctl.Run(e.Ctx, "rollout", "status", "fix")
		if err != nil || !strings.Contains(out, "AwaitingPromotion") {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	for n, a := range agents {
		want := 0
		if n == canary {
			want = 1
		}
		if got := len(a.ran("ran")); got != want {
			t.Fatalf("before the promotion the script ran %d times on %s, want %d (the canary is %s)", got, n, want, canary)
		}
	}
	promoted := time.Now()
	if out, err := ctl.Run(e.Ctx, "rollout", "promote", "fix"); err != nil || !strings.Contains(out, "promoted to stage 2") {
		t.Fatalf("rollout promote: %v\n%s", err, out)
	}
	all := map[string]string{}
	for _, n := range nodes {
		all[n] = rollout.Succeeded
	}
	waitEntries(e, dyn, "fix", "every node succeeded", inStates(all))

	// A node that joins now runs it too.
	late := e.ID + "-late"
	if err := cluster.CreateNode(e.Ctx, e.Client, late, map[string]string{cluster.LabelTestEnv: e.ID}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.Client.CoreV1().Nodes().Delete(ctx, late, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting node %s: %v", late, err)
		}
	})
	agents[late] = rolloutAgent(t, e, late, key)
	all[late] = rollout.Succeeded
	waitEntries(e, dyn, "fix", "the node that joined later succeeded", inStates(all))
	e.Eventually("the rollout Complete", cluster.DefaultTimeout, func(context.Context) error {
		out, err := ctl.Run(e.Ctx, "rollout", "status", "fix")
		if err != nil || !strings.Contains(out, "Complete: 6 of 6 nodes succeeded") {
			return fmt.Errorf("%v: %s", err, out)
		}
		t.Logf("kustodian-ctl rollout status fix:\n%s", out)
		return nil
	})
	// kubectl wait reads the conditions the agents write.
	bin, err := cluster.BinDir(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	wait := exec.CommandContext(e.Ctx, filepath.Join(bin, "kubectl"), "--kubeconfig", e.Kubeconfig, "-n", e.Namespace,
		"wait", "--for=condition=Complete", "maintenancerollout/fix", "--timeout=60s")
	if out, err := wait.CombinedOutput(); err != nil || !strings.Contains(string(out), "condition met") {
		t.Errorf("kubectl wait --for=condition=Complete: %v\n%s", err, out)
	}
	for n, a := range agents {
		if got := a.ran("ran"); len(got) != 1 {
			t.Errorf("the script ran %d times on %s, want once", len(got), n)
		}
	}
	checkExclusive(t, tl, 1)
	for _, tr := range tl.Transitions() {
		if tr.State == lock.Waiting && tr.Node != canary && tr.At.Before(promoted) {
			t.Errorf("%s requested maintenance at %s, before the promotion at %s", tr.Node, tr.At.Format("15:04:05.000"), promoted.Format("15:04:05.000"))
		}
	}
	if g := tl.Grants(); len(g) == 0 || g[0] != canary {
		t.Errorf("grants %v: the canary %s was not first", g, canary)
	}
}

// A failing script on the canary: its rollback runs, the node stays
// cordoned with the lock, the rollout stops (no other node takes it, even
// promoted) and says which node failed with its output's last lines.
func TestRolloutFailureRollsBackAndStops(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(3)
	nodecreds.Install(e, e.Namespace)
	key := nodecreds.NewRolloutKey(t)
	agents := rolloutAgents(t, e, nodes, key)
	script := writeScript(t, "echo run >> ../../ran\necho 'E: dpkg was interrupted' >&2\nexit 3\n")
	rollback := writeScript(t, "echo undone >> ../../rolledback\n")
	ctl := nodecreds.CtlFor(e)
	if out, err := ctl.Run(e.Ctx, "rollout", "create", "bad", "--script", script, "--rollback", rollback, "--key", key.Private); err != nil {
		t.Fatalf("rollout create: %v\n%s", err, out)
	}
	dyn := dynamicClient(t, e)
	var canary string
	waitEntries(e, dyn, "bad", "the canary rolled back", func(got map[string]rollout.NodeStatus) error {
		for n, en := range got {
			if en.State == rollout.RolledBack {
				canary = n
				return nil
			}
		}
		return fmt.Errorf("entries %v", got)
	})
	a := agents[canary]
	if len(a.ran("ran")) != 1 || len(a.ran("rolledback")) != 1 {
		t.Fatalf("on the canary the script ran %d times and the rollback %d, want once each", len(a.ran("ran")), len(a.ran("rolledback")))
	}
	waitRecord(e, canary, "the canary held", inState(lock.Failed))
	if h := lockHolder(e); h != canary || !nodeObject(e, canary).Spec.Unschedulable {
		t.Fatalf("after the failure: lock held by %q, canary cordoned %v", h, nodeObject(e, canary).Spec.Unschedulable)
	}
	if out, err := ctl.Run(e.Ctx, "rollout", "promote", "bad"); err != nil {
		t.Fatalf("rollout promote: %v\n%s", err, out)
	}
	var out string
	e.Eventually("status showing the failure", cluster.DefaultTimeout, func(context.Context) error {
		var err error
		out, err = ctl.Run(e.Ctx, "rollout", "status", "bad")
		if err != nil || !strings.Contains(out, "Failed: node "+canary) || !strings.Contains(out, "E: dpkg was interrupted") {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	t.Logf("kustodian-ctl rollout status bad:\n%s", out)
	// The others have seen the promotion (their rows say why they wait)
	// and none ran it.
	for n, a := range agents {
		if n != canary && len(a.ran("ran")) != 0 {
			t.Errorf("%s ran the script of a stopped rollout", n)
		}
	}
	if !strings.Contains(out, "the rollout stopped: node "+canary) {
		t.Errorf("the other nodes' rows do not say the rollout stopped:\n%s", out)
	}
}

// ansible/rollout-cluster.yml submits a rollout from the admin's machine:
// the agents of the nodes it selects run it; run again, it changes
// nothing; another script under the same name is refused.
func TestRolloutSubmittedByAnsible(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(2)
	nodecreds.Install(e, e.Namespace)
	key := nodecreds.NewRolloutKey(t)
	agents := rolloutAgents(t, e, nodes, key)
	work := t.TempDir()
	if err := os.WriteFile(filepath.Join(work, "fix.sh"), []byte("#!/bin/sh\necho run >> ../../ran\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	play := func(script string) (string, error) {
		cmd := exec.CommandContext(e.Ctx, "ansible-playbook", filepath.Join(dist.RepoRoot(t), "ansible", "rollout-cluster.yml"),
			"-e", "rollout_name=fix", "-e", "rollout_script="+script, "-e", "rollout_key="+key.Private,
			"-e", `{"rollout_stages": ["all"]}`, "-e", "kustodian_ctl="+buildbin.Ctl(t),
			"-e", "kustodian_admin_kubeconfig="+e.Kubeconfig, "-e", "kustodian_namespace="+e.Namespace)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "PWD="+work, "ANSIBLE_CONFIG="+filepath.Join(dist.RepoRoot(t), "ansible", "ansible.cfg"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := play("fix.sh"); err != nil || !strings.Contains(out, "changed=1") {
		t.Fatalf("ansible-playbook rollout-cluster.yml: %v\n%s", err, out)
	}
	dyn := dynamicClient(t, e)
	waitEntries(e, dyn, "fix", "both nodes succeeded", inStates(map[string]string{nodes[0]: rollout.Succeeded, nodes[1]: rollout.Succeeded}))
	if out, err := play("fix.sh"); err != nil || !strings.Contains(out, "changed=0") || !strings.Contains(out, "Complete: 2 of 2 nodes succeeded") {
		t.Errorf("the playbook again: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(work, "other.sh"), []byte("#!/bin/sh\ntrue\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := play("other.sh"); err == nil || !strings.Contains(out, "exists with revision") {
		t.Errorf("another script under the same name: %v\n%s", err, out)
	}
	for n, a := range agents {
		if got := len(a.ran("ran")); got != 1 {
			t.Errorf("the script ran %d times on %s, want once", got, n)
		}
	}
}
