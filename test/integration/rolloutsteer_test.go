package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// Pause withdraws a node queued for a rollout (Cancelled) while the node
// in maintenance finishes; resume lets it take the rollout again. A script
// that fails once runs again after its backoff (onFailure retry) and
// succeeds, its node never given back in between. status --watch follows
// to the end.
func TestRolloutPauseResumeAndRetry(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(2)
	nodecreds.Install(e, e.Namespace)
	tl := recordTimeline(e)
	key := nodecreds.NewRolloutKey(t)
	agents := rolloutAgents(t, e, nodes, key)
	gate := filepath.Join(t.TempDir(), "go")
	// The first run on each node fails; the second waits for the test's
	// go-ahead and succeeds.
	script := writeScript(t, fmt.Sprintf(`echo run >> ../../ran
if [ ! -e ../../failed-once ]; then touch ../../failed-once; echo 'E: mirror unreachable' >&2; exit 1; fi
while [ ! -e %s ]; do sleep 0.1; done
echo patched
`, gate))
	ctl := nodecreds.CtlFor(e)
	if out, err := ctl.Run(e.Ctx, "rollout", "create", "steer", "--script", script, "--stage", "all",
		"--on-failure", "retry", "--retries", "2", "--backoff", "1s", "--key", key.Private); err != nil {
		t.Fatalf("rollout create: %v\n%s", err, out)
	}
	dyn := dynamicClient(t, e)
	var first, second string
	waitEntries(e, dyn, "steer", "one node running its second attempt, the other queued", func(got map[string]rollout.NodeStatus) error {
		for _, n := range nodes {
			if got[n].State == rollout.Running && got[n].Attempts == 2 {
				first = n
			}
		}
		for _, n := range nodes {
			if n != first && got[n].State == rollout.Waiting {
				second = n
			}
		}
		if first == "" || second == "" {
			return fmt.Errorf("entries %v", got)
		}
		return nil
	})
	if out, err := ctl.Run(e.Ctx, "rollout", "pause", "steer"); err != nil {
		t.Fatalf("rollout pause: %v\n%s", err, out)
	}
	waitEntries(e, dyn, "steer", "the queued node withdrawn", inStates(map[string]string{second: rollout.Cancelled, first: rollout.Running}))
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitEntries(e, dyn, "steer", "the node in maintenance finished", inStates(map[string]string{first: rollout.Succeeded, second: rollout.Cancelled}))
	if len(agents[second].ran("ran")) != 0 {
		t.Fatalf("%s ran the script though it was withdrawn", second)
	}
	watchCtx, cancel := context.WithTimeout(e.Ctx, 2*cluster.DefaultTimeout)
	defer cancel()
	var watched strings.Builder
	watch := ctl.Command(watchCtx, "rollout", "status", "steer", "--watch")
	watch.Stdout, watch.Stderr = &watched, &watched
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	if out, err := ctl.Run(e.Ctx, "rollout", "resume", "steer"); err != nil {
		t.Fatalf("rollout resume: %v\n%s", err, out)
	}
	if err := watch.Wait(); err != nil {
		t.Fatalf("rollout status --watch: %v\n%s", err, watched.String())
	}
	out := watched.String()
	if !strings.Contains(out, "Complete: 2 of 2 nodes succeeded") || !strings.Contains(out, second+" Succeeded") {
		t.Errorf("rollout status --watch said:\n%s", out)
	}
	t.Logf("kustodian-ctl rollout status steer --watch:\n%s", out)
	for n, a := range agents {
		if got := len(a.ran("ran")); got != 2 {
			t.Errorf("the script ran %d times on %s, want twice (a failure, then the retry)", got, n)
		}
	}
	// Through its failure and retry each node stayed in maintenance: its
	// records never went back to Idle in between.
	for _, n := range nodes {
		idle := 0
		for _, tr := range tl.Transitions() {
			if tr.Node == n && tr.State == "Idle" {
				idle++
			}
		}
		if idle > 1+boolInt(n == second) {
			t.Errorf("%s went back to Idle %d times: a retry gave the node back", n, idle)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A node queued for a rollout that is deleted withdraws its job, which
// never runs; a rollout refused for want of a signature runs once it is
// signed (a changed spec is checked again).
func TestRolloutDeletedWithdrawsAndSignedLaterRuns(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(2)
	nodecreds.Install(e, e.Namespace)
	key := nodecreds.NewRolloutKey(t)
	agents := rolloutAgents(t, e, nodes, key)
	gate := filepath.Join(t.TempDir(), "go")
	script := writeScript(t, fmt.Sprintf("echo run >> ../../ran\nwhile [ ! -e %s ]; do sleep 0.1; done\n", gate))
	ctl := nodecreds.CtlFor(e)
	if out, err := ctl.Run(e.Ctx, "rollout", "create", "gone", "--script", script, "--stage", "all", "--key", key.Private); err != nil {
		t.Fatalf("rollout create: %v\n%s", err, out)
	}
	dyn := dynamicClient(t, e)
	var running, queued string
	waitEntries(e, dyn, "gone", "one node running, the other queued", func(got map[string]rollout.NodeStatus) error {
		running, queued = "", ""
		for _, n := range nodes {
			switch got[n].State {
			case rollout.Running:
				running = n
			case rollout.Waiting:
				queued = n
			}
		}
		if running == "" || queued == "" {
			return fmt.Errorf("entries %v", got)
		}
		return nil
	})
	if err := dyn.Resource(rollout.GVR).Namespace(e.Namespace).Delete(e.Ctx, "gone", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	q := agents[queued]
	e.Eventually(queued+" withdrawing its job", cluster.DefaultTimeout, func(context.Context) error {
		if _, err := os.Stat(q.requestFile()); err == nil {
			return fmt.Errorf("its request is still there")
		}
		return nil
	})
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitRecord(e, running, "the running node given back", func(r *lock.Record) error {
		if r != nil {
			return fmt.Errorf("%s is %s", running, r.State)
		}
		return nil
	})
	if len(q.ran("ran")) != 0 || len(agents[running].ran("ran")) != 1 {
		t.Fatalf("runs: %s %d, %s %d; want 0 and 1", queued, len(q.ran("ran")), running, len(agents[running].ran("ran")))
	}

	// Unsigned: refused by both; signed afterwards: both run it.
	out, err := ctl.Run(e.Ctx, "rollout", "create", "later", "--script", writeScript(t, "echo later >> ../../later\n"), "--stage", "all", "--dry-run=client", "-o", "json")
	if err != nil {
		t.Fatalf("rollout create --dry-run: %v\n%s", err, out)
	}
	applyJSON(t, e, dyn, out)
	waitEntries(e, dyn, "later", "both refusing the unsigned rollout", inStates(map[string]string{nodes[0]: rollout.Refused, nodes[1]: rollout.Refused}))
	r := getRollout(e, dyn, "later")
	b, err := os.ReadFile(key.Private)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.ParsePrivateKey(b)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := rollout.Sign(signer, []byte(rollout.Manifest(r.Namespace, r.Name, r.Spec)))
	if err != nil {
		t.Fatal(err)
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"signature": sig}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(rollout.GVR).Namespace(e.Namespace).Patch(e.Ctx, "later", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEntries(e, dyn, "later", "both running it once signed", inStates(map[string]string{nodes[0]: rollout.Succeeded, nodes[1]: rollout.Succeeded}))
}
