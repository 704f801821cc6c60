package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/nodemarks"
	"github.com/kustodian/kustodian/test/cluster"
)

// 5. kill -9 of an agent in each state, and a restart: the cycle completes,
// and no other node is granted meanwhile.
func TestAgentSurvivesKill9InEveryState(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	target, spare := blockedDrain(t, e)
	tl := recordTimeline(e)
	a := newAgent(t, e, target)
	b := newAgent(t, e, spare)

	a.request("upgrade")
	a.start()
	waitRecord(e, target, "Draining, blocked by the PDB", inStateSaying(lock.Draining, "blocked by PDB"))
	b.request("upgrade")
	b.start()
	waitRecord(e, spare, "waiting behind "+target, inStateSaying(lock.Waiting, "lock held by "+target))

	// Draining.
	a.kill()
	if h := lockHolder(e); h != target {
		t.Fatalf("after kill -9 while Draining the lock is held by %q", h)
	}
	a.start()
	waitRecord(e, target, "Draining again after the restart", inState(lock.Draining))

	// Waiting.
	b.kill()
	b.start()
	waitRecord(e, spare, "Waiting again after the restart", inState(lock.Waiting))

	uncordon(e, spare)
	a.waitInProgress(cluster.DefaultTimeout)

	// InMaintenance, down for longer than its heartbeat takes to go stale:
	// its Node exists, so the lock stays.
	a.kill()
	e.Eventually(target+"'s heartbeat to go stale", cluster.DefaultTimeout, func(context.Context) error {
		r := record(e, target)
		if r == nil {
			return fmt.Errorf("no record")
		}
		if age := time.Since(r.Heartbeat); age < 5*time.Second {
			return fmt.Errorf("heartbeat %s old", age.Round(time.Millisecond))
		}
		return nil
	})
	waitRecord(e, spare, "to have looked at the lock since", func(r *lock.Record) error {
		if r == nil || time.Since(r.Heartbeat) > time.Second {
			return fmt.Errorf("no recent heartbeat")
		}
		return nil
	})
	if h := lockHolder(e); h != target {
		t.Fatalf("a stale holder whose Node exists lost the lock to %q", h)
	}
	if b.inProgress() {
		t.Fatal("the waiting node got the go-ahead while the holder was down")
	}
	a.start()
	waitRecord(e, target, "InMaintenance again after the restart", inState(lock.InMaintenance))
	if !a.inProgress() {
		t.Fatal("the in-progress file is gone after the restart")
	}

	// Completing: the script finished while the agent was down.
	a.kill()
	a.finish()
	a.start()
	a.exitsZero()
	if nodeObject(e, target).Spec.Unschedulable {
		t.Error("target still cordoned after completing")
	}
	finishInTurn(t, e, []*agentProc{b})
	checkExclusive(t, tl, 1)
}

// 6. A holder whose host is gone (agent dead) and whose Node is deleted
// frees the lock once its heartbeat is stale; deleting only the Node of a
// live holder does not.
func TestAgentLockOfDeletedNode(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	const why = "the takeover of a deleted Node's lock once its heartbeat is stale is the rule for agents whose tokens are not bound to their Nodes (a node-bound token dies with its Node, and its lock goes with it: TestAgentLockGoesWithItsNode)"
	a := newAdminAgent(t, e, nodes[0], why, "--stay")
	b := newAdminAgent(t, e, nodes[1], why)
	a.request("upgrade")
	a.start()
	a.waitInProgress(cluster.DefaultTimeout)
	b.request("upgrade")
	b.start()
	waitRecord(e, nodes[1], "Waiting", inState(lock.Waiting))

	if err := e.Client.CoreV1().Nodes().Delete(e.Ctx, nodes[0], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	// Long enough for a dead holder's record to be stale, seen by b's heartbeats.
	waitRecord(e, nodes[1], "to keep looking at the lock", func(r *lock.Record) error {
		if r == nil || r.Heartbeat.Before(deleted.Add(6*time.Second)) {
			return fmt.Errorf("waiting for a heartbeat later than 6s after the deletion")
		}
		return nil
	})
	if h := lockHolder(e); h != nodes[0] {
		t.Fatalf("deleting the Node of a live holder gave the lock to %q", h)
	}

	a.kill() // the host is gone too
	b.waitInProgress(cluster.DefaultTimeout)
	if h := lockHolder(e); h != nodes[1] {
		t.Fatalf("lock holder %q, want %s", h, nodes[1])
	}
	b.completes()
}

// 6b. With node-bound tokens no agent takes over another's lock (the
// admission policy forbids it); the lock is owned by its holder's Node, and
// the garbage collector deletes it with the Node. The holder's token dies
// with its Node too, so its agent can do nothing more in the cluster.
func TestAgentLockGoesWithItsNode(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	a := newAgent(t, e, nodes[0], "--stay")
	b := newAgent(t, e, nodes[1])
	a.request("upgrade")
	a.start()
	a.waitInProgress(cluster.DefaultTimeout)
	l, err := e.Client.CoordinationV1().Leases(e.Namespace).Get(e.Ctx, lock.DefaultGroup.LockName(0), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a0 := nodeObject(e, nodes[0])
	if refs := l.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].Name != nodes[0] || refs[0].UID != a0.UID {
		t.Fatalf("the lock's owners are %+v, want the Node %s (uid %s)", refs, nodes[0], a0.UID)
	}
	b.request("upgrade")
	b.start()
	waitRecord(e, nodes[1], "Waiting", inState(lock.Waiting))

	if err := e.Client.CoreV1().Nodes().Delete(e.Ctx, nodes[0], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	b.waitInProgress(cluster.DefaultTimeout)
	l, err = e.Client.CoordinationV1().Leases(e.Namespace).Get(e.Ctx, lock.DefaultGroup.LockName(0), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.UID == "" || lock.Holder(l) != nodes[1] || len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Name != nodes[1] {
		t.Fatalf("lock after the holder's Node went: holder %q owners %+v", lock.Holder(l), l.OwnerReferences)
	}
	b.completes()
	if l, err := e.Client.CoordinationV1().Leases(e.Namespace).Get(e.Ctx, lock.DefaultGroup.LockName(0), metav1.GetOptions{}); err != nil || lock.Holder(l) != "" || len(l.OwnerReferences) != 0 {
		t.Errorf("a released lock keeps holder or owners: %v %+v", err, l)
	}
}

// The API server away at start and mid-cycle: the agent retries with
// backoff, says so in STATUS, and completes the cycle once it is back. The
// test runs its own control plane, which it stops and starts.
func TestAgentRidesOutAPIServerOutages(t *testing.T) {
	ctx := t.Context()
	opts := cluster.Options{Name: fmt.Sprintf("outage-%d", os.Getpid()), Log: testWriter{t}}
	c, err := cluster.Up(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Down(context.Background(), opts); err != nil {
			t.Error(err)
		}
	})
	e := &cluster.Env{T: t, ID: "outage", Namespace: "kustodian", Client: c.Client, Config: c.Config, Kubeconfig: c.Kubeconfig, Ctx: ctx}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.Namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const node = "outage-node"
	if err := cluster.CreateNode(ctx, c.Client, node, nil); err != nil {
		t.Fatal(err)
	}

	a := newAgent(t, e, node)
	a.notify = listenNotify(t)
	if err := cluster.Stop(ctx, opts); err != nil {
		t.Fatal(err)
	}
	a.request("upgrade")
	a.start()
	a.notify.waitStatus(e, "waiting for the API server")
	if _, err := cluster.Start(ctx, opts); err != nil {
		t.Fatal(err)
	}
	a.waitInProgress(cluster.DefaultTimeout)
	if !a.notify.sent("READY=1") {
		t.Error("no READY=1 sent")
	}
	a.notify.waitStatus(e, "in maintenance for")

	if err := cluster.Stop(ctx, opts); err != nil {
		t.Fatal(err)
	}
	a.finish() // the script is done while the API server is away
	// The agent notices (a failed step, or a request of its informers that
	// cannot connect) and waits for the API server's return.
	a.notify.waitStatus(e, "the API server is away")
	if !a.running() {
		t.Fatal("the agent gave up while the API server was away")
	}
	if _, err := cluster.Start(ctx, opts); err != nil {
		t.Fatal(err)
	}
	if code := a.waitExit(2 * cluster.DefaultTimeout); code != 0 {
		t.Fatalf("agent exited %d", code)
	}
	n, err := c.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Spec.Unschedulable {
		t.Error("node still cordoned")
	}
	if h := lockHolder(e); h != "" {
		t.Errorf("lock still held by %s", h)
	}
	t.Logf("STATUS lines: %q", a.notify.statuses())
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// lock.ttl: a live holder renews its lock beyond the TTL; a holder that
// stops renewing loses it after the TTL, although its Node exists.
func TestAgentLockTTL(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(2)
	const why = "an expired lock is taken over by another node, which the admission policy forbids node-bound tokens (an agent with one refuses lock.ttl: TestAgentRefusesBadInput)"
	a := newAdminAgent(t, e, nodes[0], why, "--lock-ttl", "3s")
	b := newAdminAgent(t, e, nodes[1], why, "--lock-ttl", "3s")
	a.request("upgrade")
	a.start()
	a.waitInProgress(cluster.DefaultTimeout)
	granted := time.Now()
	b.request("upgrade")
	b.start()
	waitRecord(e, nodes[1], "to watch the lock for twice the TTL", func(r *lock.Record) error {
		if err := inState(lock.Waiting)(r); err != nil {
			return err
		}
		if r.Heartbeat.Before(granted.Add(6 * time.Second)) {
			return fmt.Errorf("heartbeat %s after the grant", r.Heartbeat.Sub(granted).Round(time.Millisecond))
		}
		return nil
	})
	if h := lockHolder(e); h != nodes[0] {
		t.Fatalf("a live holder lost its lock to %q", h)
	}

	a.kill()
	b.waitInProgress(cluster.DefaultTimeout)
	if h := lockHolder(e); h != nodes[1] {
		t.Fatalf("lock holder %q, want %s", h, nodes[1])
	}
	b.completes()
}

// An agent killed half-way through Completing (the request gone, the
// in-progress file and the lock still there, the node still cordoned by
// Kustodian) finishes the job at its next start.
func TestAgentFinishesAnInterruptedCompletion(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	a := newAgent(t, e, nodes[0])
	other := newAgent(t, e, nodes[1])
	// What a cycle leaves when its agent dies right after the script is done.
	holder := nodes[0]
	now := metav1.NewMicroTime(time.Now())
	if _, err := e.Client.CoordinationV1().Leases(e.Namespace).Create(e.Ctx, &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: lock.DefaultGroup.LockName(0), Namespace: e.Namespace,
			Labels: map[string]string{lock.LabelPolicy: lock.DefaultGroup.Policy}},
		Spec: coordv1.LeaseSpec{HolderIdentity: &holder, AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := []byte(`{"spec":{"unschedulable":true},"metadata":{"annotations":{"kustodian.io/cordoned":"true"},"labels":{"kustodian.io/state":"InMaintenance"}}}`)
	if _, err := e.Client.CoreV1().Nodes().Patch(e.Ctx, holder, "application/strategic-merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(a.inProgressFile(), []byte(holder+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other.request("upgrade")
	other.start()
	waitRecord(e, nodes[1], "waiting behind the interrupted node", inStateSaying(lock.Waiting, "lock held by "+holder))

	a.start()
	a.exitsZero()
	n := nodeObject(e, holder)
	if n.Spec.Unschedulable || n.Labels[lock.LabelState] != "" || n.Annotations[nodemarks.AnnotationCordoned] != "" {
		t.Errorf("node after completion: unschedulable=%v labels=%v annotations=%v", n.Spec.Unschedulable, n.Labels, n.Annotations)
	}
	if a.inProgress() {
		t.Error("in-progress file left")
	}
	finishInTurn(t, e, []*agentProc{other})
}
