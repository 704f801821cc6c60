package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/util/retry"

	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/nodemarks"
	"github.com/kustodian/kustodian/test/cluster"
)

// podsOn lists the pods bound to node, terminating ones included.
func podsOn(ctx context.Context, e *cluster.Env, node string) ([]string, error) {
	list, err := e.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
	})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Namespace+"/"+p.Name)
	}
	return names, nil
}

// 1. The happy path on one node, with the raw file protocol.
func TestAgentHappyPath(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(3)
	// All pods on nodes[0], the node to drain; the others take the replacements.
	e.Cordon(nodes[1])
	e.Cordon(nodes[2])
	e.Deployment("web", 6)
	e.RunningPods("web", 6)
	uncordon(e, nodes[1])
	uncordon(e, nodes[2])
	if pods, _ := podsOn(e.Ctx, e, nodes[0]); len(pods) != 6 {
		t.Fatalf("%d pods on %s, want 6", len(pods), nodes[0])
	}

	a := newAgent(t, e, nodes[0])
	a.request("kernel 6.1.99")
	a.start()
	a.waitInProgress(cluster.DefaultTimeout)

	// The in-progress file exists only once the node is cordoned and empty.
	if n := nodeObject(e, nodes[0]); !n.Spec.Unschedulable || n.Annotations[nodemarks.AnnotationCordoned] != "true" {
		t.Errorf("node when the in-progress file appeared: unschedulable=%v annotations=%v", n.Spec.Unschedulable, n.Annotations)
	}
	if pods, err := podsOn(e.Ctx, e, nodes[0]); err != nil || len(pods) != 0 {
		t.Errorf("pods still on %s when the in-progress file appeared: %v %v", nodes[0], pods, err)
	}
	// The record and the label follow the file.
	waitRecord(e, nodes[0], "InMaintenance", inState(lock.InMaintenance))
	if n := nodeObject(e, nodes[0]); n.Labels[lock.LabelState] != string(lock.InMaintenance) {
		t.Errorf("node label %s=%q, want InMaintenance", lock.LabelState, n.Labels[lock.LabelState])
	}
	if h := lockHolder(e); h != nodes[0] {
		t.Errorf("lock holder %q, want %s", h, nodes[0])
	}
	r := record(e, nodes[0])
	if r == nil || r.State != lock.InMaintenance || r.Reason != "kernel 6.1.99" || r.RequestID == "" {
		t.Errorf("record in maintenance: %+v", r)
	}
	e.RunningPods("web", 6) // the evicted pods were replaced on the other nodes

	a.completes()
	if a.inProgress() {
		t.Error("the in-progress file is still there")
	}
	n := nodeObject(e, nodes[0])
	if n.Spec.Unschedulable {
		t.Error("the node is still cordoned")
	}
	if _, ok := n.Annotations[nodemarks.AnnotationCordoned]; ok {
		t.Error("the cordoned annotation is still there")
	}
	if _, ok := n.Labels[lock.LabelState]; ok {
		t.Error("the state label is still there")
	}
	if h := lockHolder(e); h != "" {
		t.Errorf("the lock is still held by %q", h)
	}
	if r := record(e, nodes[0]); r != nil {
		t.Errorf("the record is still there: %+v", r)
	}
	events, err := e.Client.CoreV1().Events("default").List(e.Ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", nodes[0]).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, ev := range events.Items {
		if ev.Source.Component == "kustodian" {
			reasons = append(reasons, ev.Reason)
		}
	}
	sort.Strings(reasons)
	want := []string{"Drained", "LockAcquired", "LockReleased", "MaintenanceCompleted", "MaintenanceRequested", "MaintenanceStarted"}
	if !reflect.DeepEqual(reasons, want) {
		t.Errorf("events %v, want %v", reasons, want)
	}

	// Path-activated and nothing requested: it exits 0 at once.
	a.start()
	a.exitsZero()
}

// 2. Five agents request at once: one node at a time, in request order.
func TestAgentFiveNodesOneAtATime(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(5)
	e.Deployment("web", 10)
	e.PDB("web", "web", 8)
	e.RunningPods("web", 10)
	tl := recordTimeline(e)
	// Follow the budget from the moment its status has counted every pod:
	// before that its numbers lag the pods and say nothing about evictions.
	e.Eventually("PDB web to count all 10 pods", cluster.DefaultTimeout, func(ctx context.Context) error {
		pdb, err := e.Client.PolicyV1().PodDisruptionBudgets(e.Namespace).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pdb.Status.ObservedGeneration != pdb.Generation || pdb.Status.CurrentHealthy != 10 {
			return fmt.Errorf("PDB counts %d healthy pods", pdb.Status.CurrentHealthy)
		}
		return nil
	})
	pdbSlack := watchPDB(e, "web")

	agents := make([]*agentProc, len(nodes))
	for i, n := range nodes {
		agents[i] = newAgent(t, e, n)
	}
	for _, a := range agents {
		a.request("patch")
	}
	for _, a := range agents {
		a.start()
	}
	// Each script works for a random short time once allowed, then finishes.
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := cluster.Eventually(e.Ctx, 3*cluster.DefaultTimeout, func(context.Context) error {
				if !a.inProgress() {
					return fmt.Errorf("%s not in maintenance", a.node)
				}
				return nil
			})
			if err != nil {
				t.Error(err)
				return
			}
			work := time.NewTimer(time.Duration(rand.IntN(300)) * time.Millisecond) // the script's work
			<-work.C
			if err := a.removeRequest(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	for _, a := range agents {
		a.exitsZero()
	}
	e.Eventually("every node to be Idle in the timeline", cluster.DefaultTimeout, func(context.Context) error {
		return tl.AllIdle(nodes)
	})
	t.Logf("timeline:\n%s", tl)
	checkExclusive(t, tl, 1)

	// Grants follow the order in which the requests reached the cluster.
	grants := tl.Grants()
	if len(grants) != len(nodes) {
		t.Fatalf("%d grants (%v), want %d", len(grants), grants, len(nodes))
	}
	if order := tl.RequestOrder(); !reflect.DeepEqual(grants, order) {
		t.Errorf("grant order %v, request order %v", grants, order)
	}
	for _, n := range nodes {
		if nodeObject(e, n).Spec.Unschedulable {
			t.Errorf("%s is still cordoned", n)
		}
	}
	if slack := pdbSlack(); slack < 0 {
		t.Errorf("PDB web was violated: %d healthy pods short", -slack)
	}
}

// watchPDB follows a PDB's status and returns a function that tells the
// smallest margin seen between healthy and desired healthy pods: negative
// means the budget was violated.
func watchPDB(e *cluster.Env, name string) func() int32 {
	e.T.Helper()
	w, err := e.Client.PolicyV1().PodDisruptionBudgets(e.Namespace).Watch(e.Ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
	})
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(w.Stop)
	var mu sync.Mutex
	var seen bool
	var minSlack int32
	go func() {
		for ev := range w.ResultChan() {
			pdb, ok := ev.Object.(*policyv1.PodDisruptionBudget)
			if !ok || pdb.Status.ObservedGeneration != pdb.Generation {
				continue
			}
			slack := pdb.Status.CurrentHealthy - pdb.Status.DesiredHealthy
			mu.Lock()
			if !seen || slack < minSlack {
				seen, minSlack = true, slack
			}
			mu.Unlock()
		}
	}()
	return func() int32 {
		mu.Lock()
		defer mu.Unlock()
		if !seen {
			e.T.Errorf("no status of PDB %s was seen", name)
		}
		return minSlack
	}
}

// 3. A failed script keeps the request: the lock stays held, the others wait
// and say who holds it; removing the request lets the rollout go on.
func TestAgentFailedScriptStopsTheRollout(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(3)
	tl := recordTimeline(e)
	first := newAgent(t, e, nodes[0], "--stay")
	first.request("upgrade")
	first.start()
	first.waitInProgress(cluster.DefaultTimeout)

	others := []*agentProc{newAgent(t, e, nodes[1]), newAgent(t, e, nodes[2])}
	for _, a := range others {
		a.request("upgrade")
		a.start()
	}
	// The script on nodes[0] failed: it never removes the request.
	for _, a := range others {
		waitRecord(e, a.node, "waiting behind the failed node", func(r *lock.Record) error {
			if err := inState(lock.Waiting)(r); err != nil {
				return err
			}
			if !strings.Contains(r.Message, "lock held by "+nodes[0]) {
				return fmt.Errorf("message %q does not name the holder %s", r.Message, nodes[0])
			}
			return nil
		})
	}
	if h := lockHolder(e); h != nodes[0] {
		t.Fatalf("lock holder %q, want %s", h, nodes[0])
	}
	if !nodeObject(e, nodes[0]).Spec.Unschedulable {
		t.Fatal("the failed node is not cordoned")
	}
	for _, a := range others {
		if a.inProgress() {
			t.Fatalf("%s got the go-ahead while %s holds the lock", a.node, nodes[0])
		}
	}

	// An operator fixes the node and removes the request: the rollout goes on.
	first.finish()
	finishInTurn(t, e, others)
	waitRecord(e, nodes[0], "back to Idle", func(r *lock.Record) error {
		if r != nil {
			return fmt.Errorf("state %s", r.State)
		}
		return nil
	})
	if !first.running() {
		t.Error("the --stay agent exited")
	}
	checkExclusive(t, tl, 1)
}

// finishInTurn plays the scripts of agents that wait in a queue: whichever
// gets the go-ahead finishes, until all have, and each agent exits 0.
func finishInTurn(t *testing.T, e *cluster.Env, agents []*agentProc) {
	t.Helper()
	left := append([]*agentProc(nil), agents...)
	for len(left) > 0 {
		var next int
		e.Eventually("one of the waiting nodes to get the go-ahead", cluster.DefaultTimeout, func(context.Context) error {
			for i, a := range left {
				if a.inProgress() {
					next = i
					return nil
				}
			}
			return fmt.Errorf("%d nodes still waiting", len(left))
		})
		a := left[next]
		a.completes()
		left = append(left[:next], left[next+1:]...)
	}
}

// uncordon makes a node schedulable again.
func uncordon(e *cluster.Env, node string) {
	e.T.Helper()
	patch := []byte(`{"spec":{"unschedulable":false}}`)
	if _, err := e.Client.CoreV1().Nodes().Patch(e.Ctx, node, "application/strategic-merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		e.T.Fatalf("uncordoning %s: %v", node, err)
	}
}

// blockedDrain sets up a node whose drain a PDB blocks: two pods of "db" on
// nodes[0], PDB minAvailable 1, and the only other node cordoned, so that
// the first eviction's replacement cannot run and the second eviction is
// refused until spare is uncordoned.
func blockedDrain(t *testing.T, e *cluster.Env) (target, spare string) {
	t.Helper()
	nodes := e.Nodes(2)
	target, spare = nodes[0], nodes[1]
	e.Cordon(spare)
	e.Deployment("db", 2)
	e.PDB("db", "db", 1)
	for _, p := range e.RunningPods("db", 2) {
		if p.Spec.NodeName != target {
			t.Fatalf("pod %s runs on %s, want %s", p.Name, p.Spec.NodeName, target)
		}
	}
	return target, spare
}

// 4. A PDB blocks the drain until the ReplicaSet's replacement runs
// elsewhere; meanwhile the message names the pod and the PDB.
func TestAgentDrainWaitsForPDB(t *testing.T) {
	e := cluster.New(t)
	target, spare := blockedDrain(t, e)
	a := newAgent(t, e, target)
	a.request("firmware")
	a.start()

	var blocked string
	waitRecord(e, target, "to report the PDB that blocks it", func(r *lock.Record) error {
		if err := inState(lock.Draining)(r); err != nil {
			return err
		}
		if !strings.Contains(r.Message, "blocked by PDB db") || !strings.Contains(r.Message, e.Namespace+"/db-") {
			return fmt.Errorf("message %q names no pod and PDB", r.Message)
		}
		blocked = r.Message
		return nil
	})
	t.Logf("while blocked: %s", blocked)
	if a.inProgress() {
		t.Fatal("in-progress file created while a pod could not be evicted")
	}

	uncordon(e, spare) // the replacement can run: the PDB allows the next eviction
	a.waitInProgress(cluster.DefaultTimeout)
	for _, p := range e.RunningPods("db", 2) {
		if p.Spec.NodeName != spare {
			t.Errorf("pod %s runs on %s, want %s", p.Name, p.Spec.NodeName, spare)
		}
	}
	a.completes()
}

// 5. kill -9 of an agent in each state, and a restart: the cycle completes,
// and no other node is granted meanwhile.
func TestAgentSurvivesKill9InEveryState(t *testing.T) {
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

// 7. A node an admin cordoned before maintenance stays cordoned after it.
func TestAgentKeepsAnAdminCordon(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(1)
	e.Cordon(nodes[0])
	a := newAgent(t, e, nodes[0])
	a.request("upgrade")
	a.start()
	a.waitInProgress(cluster.DefaultTimeout)
	if _, ours := nodeObject(e, nodes[0]).Annotations[nodemarks.AnnotationCordoned]; ours {
		t.Error("Kustodian claimed an admin's cordon")
	}
	a.completes()
	if !nodeObject(e, nodes[0]).Spec.Unschedulable {
		t.Error("the admin's cordon was lifted")
	}
}

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
		{name: "missing namespace", args: []string{"--namespace", "nowhere"}, want: `may not read the Leases of namespace "nowhere": Kustodian is not installed there`},
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
	a.notify.waitStatus(e, "error, retrying in")
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

func kuredAnnotation(t *testing.T, e *cluster.Env) string {
	t.Helper()
	ds, err := e.Client.AppsV1().DaemonSets(e.Namespace).Get(e.Ctx, "kured", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ds.Annotations[kured.LockAnnotation]
}

func setKuredAnnotation(t *testing.T, e *cluster.Env, value string) {
	t.Helper()
	dss := e.Client.AppsV1().DaemonSets(e.Namespace)
	// The DaemonSet controller writes the status meanwhile.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds, err := dss.Get(e.Ctx, "kured", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if value == "" {
			delete(ds.Annotations, kured.LockAnnotation)
		} else {
			ds.Annotations[kured.LockAnnotation] = value
		}
		_, err = dss.Update(e.Ctx, ds, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Kured's lock: the agent waits while a node holds it (Kured rebooting),
// and holds it as kustodian:<node> during its own maintenance, in Kured's
// single and maxOwners formats.
func TestAgentKuredLock(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(2)
	held := `{"nodeID":"` + nodes[1] + `","metadata":{"unschedulable":false},"created":"` + time.Now().UTC().Format(time.RFC3339) + `","TTL":0}`
	e.KuredDaemonSet(e.Namespace, held)
	a := newAgent(t, e, nodes[0], "--kured-namespace", e.Namespace)
	a.request("upgrade")
	a.start()
	waitRecord(e, nodes[0], "to wait for Kured", func(r *lock.Record) error {
		if err := inState(lock.Waiting)(r); err != nil {
			return err
		}
		// Kured's lock holds every node alike: it is not this node's own
		// gate, so the record is not Blocked.
		if !strings.Contains(r.Message, "Kured's lock is held by "+nodes[1]) || !strings.Contains(r.Gates, `"gate":"kured","verdict":"closed"`) {
			return fmt.Errorf("message %q, gates %s", r.Message, r.Gates)
		}
		return nil
	})
	if h := lockHolder(e); h != "" {
		t.Fatalf("lock taken by %q while Kured reboots a node", h)
	}

	setKuredAnnotation(t, e, "") // Kured's reboot is done
	a.waitInProgress(cluster.DefaultTimeout)
	var single kured.Holder
	if err := json.Unmarshal([]byte(kuredAnnotation(t, e)), &single); err != nil || single.NodeID != "kustodian:"+nodes[0] {
		t.Fatalf("during maintenance Kured's lock is %q (%v), want nodeID kustodian:%s", kuredAnnotation(t, e), err, nodes[0])
	}
	// kustodian-ctl reads Kured's lock where it is told, as the agent does.
	var st struct {
		Kured *struct {
			Holders []string `json:"holders"`
		} `json:"kured"`
	}
	if out := mustCtl(t, e, "status", "--kured-namespace", e.Namespace, "-o", "json"); json.Unmarshal([]byte(out), &st) != nil ||
		st.Kured == nil || fmt.Sprint(st.Kured.Holders) != "[kustodian:"+nodes[0]+"]" {
		t.Errorf("status --kured-namespace %s:\n%s", e.Namespace, out)
	}
	a.completes()
	if v := kuredAnnotation(t, e); v != "" {
		t.Errorf("Kured's lock left after maintenance: %s", v)
	}

	// maxOwners 2 with one holder: room for the agent, beside it.
	multi := `{"maxOwners":2,"locks":[{"nodeID":"` + nodes[1] + `","metadata":{"unschedulable":false},"created":"` + time.Now().UTC().Format(time.RFC3339) + `","TTL":0}]}`
	setKuredAnnotation(t, e, multi)
	a.request("upgrade again")
	a.start()
	a.waitInProgress(cluster.DefaultTimeout)
	var m struct {
		MaxOwners int
		Locks     []kured.Holder
	}
	if err := json.Unmarshal([]byte(kuredAnnotation(t, e)), &m); err != nil || m.MaxOwners != 2 || len(m.Locks) != 2 || m.Locks[1].NodeID != "kustodian:"+nodes[0] {
		t.Fatalf("Kured's lock during maintenance: %s (%v)", kuredAnnotation(t, e), err)
	}
	a.completes()
	if err := json.Unmarshal([]byte(kuredAnnotation(t, e)), &m); err != nil || len(m.Locks) != 1 || m.Locks[0].NodeID != nodes[1] {
		t.Errorf("after maintenance Kured's lock is %s, want only %s", kuredAnnotation(t, e), nodes[1])
	}
}

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

// A drain that outlasts drain.timeout fails the maintenance (with the
// default drain.onTimeout hold): the node stays cordoned, the lock stays
// held, and the record and a MaintenanceFailed Event say why.
func TestDrainTimeoutHoldsTheLock(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(2)
	e.Cordon(nodes[1])
	e.Deployment("db", 2)
	e.PDB("db", "db", 1)
	for _, p := range e.RunningPods("db", 2) {
		if p.Spec.NodeName != nodes[0] {
			t.Fatalf("pod %s on %s, want %s", p.Name, p.Spec.NodeName, nodes[0])
		}
	}
	// nodes[1] stays cordoned: the second pod has nowhere to go, and the
	// PDB keeps the drain from evicting it.
	a := newAgent(t, e, nodes[0], "--drain-timeout", "3s")
	a.request("kernel")
	a.start()
	waitRecord(e, nodes[0], "Failed by the drain timeout", inStateSaying(lock.Failed, "drain failed"))
	eventSays(e, nodes[0], "MaintenanceFailed", "drain failed")
	if h := lockHolder(e); h != nodes[0] || !nodeObject(e, nodes[0]).Spec.Unschedulable {
		t.Errorf("after the drain timeout: holder %q, cordoned %v", h, nodeObject(e, nodes[0]).Spec.Unschedulable)
	}
	if a.inProgress() {
		t.Error("the script got the go-ahead on a node that is not drained")
	}
}
