package integration

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/cordons"
	"github.com/kustodian/kustodian/test/kuredproc"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// kuredBinary is Kured's own binary (make kured puts its path in KURED).
func kuredBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("KURED")
	if bin == "" {
		t.Fatal("KURED is not set: make test-integration builds Kured's own binary (make kured) and sets it")
	}
	return bin
}

// startKured runs Kured's own binary for node, sandboxed, with a token of
// a ServiceAccount kured that has Kured's own RBAC.
func startKured(t *testing.T, e *cluster.Env, node string, period time.Duration, args ...string) *kuredproc.Kured {
	t.Helper()
	token, ca := kuredproc.Credentials(t, e, e.Namespace)
	u, err := url.Parse(e.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	k, err := kuredproc.Start(kuredproc.Config{Binary: kuredBinary(t), Node: node, DSNamespace: e.Namespace, APIHost: u.Hostname(), APIPort: port,
		Token: token, CA: ca, Period: period, Dir: filepath.Join(t.TempDir(), node), Args: args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		k.Stop()
		if t.Failed() {
			t.Logf("Kured on %s:\n%s", node, k.Log())
		}
	})
	return k
}

// restartKured plays a node's reboot for Kured: the instance is stopped
// (by its PID) and started again on a host that needs no reboot (a new
// directory, no sentinel), with the same arguments.
func restartKured(t *testing.T, e *cluster.Env, k *kuredproc.Kured, node string, args ...string) *kuredproc.Kured {
	t.Helper()
	k.Stop()
	return startKured(t, e, node, 5*time.Second, args...)
}

// Kured's own binary on two nodes and Kustodian's agents on two others,
// all needing a reboot or a maintenance at once, with the same concurrency
// on both sides (Kured's --concurrency, the policy's concurrency): an
// independent recorder of the Nodes' cordons never finds more nodes
// cordoned at once than that; within the bound every node is done (Kured
// rebooted and, started again, gave its node back; every agent exited 0),
// and nothing is left cordoned or locked. Kured waits 30-90 s after each
// start before it looks at its lock, so each case takes minutes; the two
// run side by side.
func TestRealKuredFleet(t *testing.T) {
	t.Parallel()
	for _, c := range []int{1, 2} {
		t.Run(fmt.Sprintf("concurrency=%d", c), func(t *testing.T) {
			t.Parallel()
			realKuredFleet(t, c)
		})
	}
}

func realKuredFleet(t *testing.T, concurrency int) {
	const bound = 8 * time.Minute
	e := cluster.New(t)
	nodes := e.Nodes(4)
	kuredNodes, ourNodes := nodes[:2], nodes[2:]
	nodecreds.Install(e, e.Namespace)
	e.KuredDaemonSet(e.Namespace, "")
	var kuredArgs []string
	if concurrency > 1 {
		kuredArgs = []string{fmt.Sprintf("--concurrency=%d", concurrency)}
		updateKured(t, e, func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Args = kuredArgs })
	}
	if err := e.ApplyPolicy(fmt.Sprintf(`{metadata: {name: fleet}, spec: {concurrency: %d}}`, concurrency)); err != nil {
		t.Fatal(err)
	}
	cordons := cordons.Record(t, e, nodes)
	start := time.Now()

	kureds := map[string]*kuredproc.Kured{}
	restarted := map[string]bool{}
	for _, n := range kuredNodes {
		kureds[n] = startKured(t, e, n, 5*time.Second, kuredArgs...)
		if err := os.WriteFile(kureds[n].Sentinel(), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var agents []*agentProc
	for _, n := range ourNodes {
		a := newAgent(t, e, n, "--kured-namespace", e.Namespace)
		a.request("kernel")
		a.start()
		agents = append(agents, a)
	}
	// The agents' maintenances last until every Kured wants its lock
	// (after its 30-90 s start delay), so that both sides ask at once.
	firstKureds := maps.Clone(kureds)
	kuredsTrying := func() bool {
		for _, k := range firstKureds {
			if !strings.Contains(k.Log(), "Reboot required") {
				return false
			}
		}
		return true
	}
	finished := map[*agentProc]bool{}
	e.Eventually("every node to be done", bound, func(context.Context) error {
		var left []string
		trying := kuredsTrying()
		for _, a := range agents {
			if !finished[a] && trying && a.inProgress() {
				if err := a.removeRequest(); err != nil {
					return err
				}
				finished[a] = true
			}
			if !a.ended() {
				left = append(left, a.node+" (agent running)")
			}
		}
		for _, n := range kuredNodes {
			k := kureds[n]
			if k.Exited() {
				return fmt.Errorf("Kured on %s exited:\n%s", n, k.Log())
			}
			if !restarted[n] {
				if k.Rebooted() {
					t.Logf("Kured rebooted %s after %s", n, time.Since(start).Round(time.Second))
					kureds[n], restarted[n] = restartKured(t, e, k, n, kuredArgs...), true
				}
				left = append(left, n+" (Kured: not rebooted yet)")
			}
		}
		for _, n := range nodes {
			if nodeObject(e, n).Spec.Unschedulable {
				left = append(left, n+" (cordoned)")
			}
		}
		for _, key := range []string{kured.LockAnnotation, kured.NextLockAnnotation} {
			v := kuredKey(t, e, key)
			if holders, err := kuredproc.Holders(v); err != nil || len(holders) > 0 {
				left = append(left, fmt.Sprintf("Kured's lock %s=%s (%v)", key, v, err))
			}
		}
		for slot := range concurrency {
			name := lock.GroupRef{Policy: "fleet"}.LockName(slot)
			l, err := e.Client.CoordinationV1().Leases(e.Namespace).Get(e.Ctx, name, metav1.GetOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Fatalf("reading lock %s: %v", name, err)
			}
			if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
				left = append(left, fmt.Sprintf("lock %s held by %s", name, *l.Spec.HolderIdentity))
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("%s", strings.Join(left, "; "))
		}
		return nil
	})
	for _, a := range agents {
		a.exitsZero()
	}
	cordons.Check(t, concurrency)
	t.Logf("all four nodes done in %s; at most %d cordoned at once (%v)", time.Since(start).Round(time.Second), len(cordons.Most()), cordons.Most())
}

// Kured's own binary and a Kustodian agent take turns: while Kustodian
// maintains node B (holding Kured's lock), Kured on node A is refused its
// lock; once B is back, Kured takes it, cordons A and reboots; after the
// reboot (Kured started again, the sentinel gone) it uncordons A and gives
// its lock back. Never both nodes cordoned at once.
func TestRealKuredAndKustodianTakeTurns(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	a, b := nodes[0], nodes[1]
	e.KuredDaemonSet(e.Namespace, "")
	cordons := cordons.Record(t, e, nodes)
	agent := newAgent(t, e, b, "--kured-namespace", e.Namespace)
	agent.request("kernel")
	agent.start()
	agent.waitInProgress(cluster.DefaultTimeout)

	k := startKured(t, e, a, 5*time.Second)
	if err := os.WriteFile(k.Sentinel(), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.Eventually("Kured to try its lock while Kustodian holds it", 3*time.Minute, func(context.Context) error {
		if !strings.Contains(k.Log(), "Lock already held: kustodian:"+b) && !k.Rebooted() {
			return fmt.Errorf("Kured has not tried yet")
		}
		return nil
	})
	cordons.Check(t, 1)
	if k.Rebooted() || nodeObject(e, a).Spec.Unschedulable {
		t.Fatalf("Kured went ahead while Kustodian held the lock")
	}
	agent.completes()
	e.Eventually("Kured to reboot "+a, 3*time.Minute, func(context.Context) error {
		if !k.Rebooted() {
			return fmt.Errorf("not rebooted yet; lock %q", kuredAnnotation(t, e))
		}
		return nil
	})
	// The reboot: Kured starts again on a host that needs none.
	k2 := restartKured(t, e, k, a)
	e.Eventually("Kured to give "+a+" back after its reboot", 3*time.Minute, func(context.Context) error {
		if k2.Exited() {
			return fmt.Errorf("Kured exited")
		}
		if nodeObject(e, a).Spec.Unschedulable || kuredAnnotation(t, e) != "" {
			return fmt.Errorf("cordoned %v, lock %q", nodeObject(e, a).Spec.Unschedulable, kuredAnnotation(t, e))
		}
		return nil
	})
	cordons.Check(t, 1)
}
