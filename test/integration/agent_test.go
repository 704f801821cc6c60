package integration

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

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
	t.Parallel()
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
	// (two writes, the record's and the Node's: a test that reads between
	// them sees the label one state behind)
	waitRecord(e, nodes[0], "InMaintenance", inState(lock.InMaintenance))
	e.Eventually("the node's state label InMaintenance", cluster.DefaultTimeout, func(context.Context) error {
		if n := nodeObject(e, nodes[0]); n.Labels[lock.LabelState] != string(lock.InMaintenance) {
			return fmt.Errorf("node label %s=%q", lock.LabelState, n.Labels[lock.LabelState])
		}
		return nil
	})
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
	t.Parallel()
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
	t.Parallel()
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
