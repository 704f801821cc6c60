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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/kustodian/kustodian/internal/drain"
	"github.com/kustodian/kustodian/internal/lock"
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
	e.Deployment("web", 6)
	e.RunningPods("web", 6)
	if pods, _ := podsOn(e.Ctx, e, nodes[0]); len(pods) == 0 {
		t.Fatalf("no pod was scheduled to %s; the drain below would prove nothing", nodes[0])
	}

	a := newAgent(t, e, nodes[0])
	a.request("kernel 6.1.99")
	a.start()
	a.waitInProgress(cluster.DefaultTimeout)

	// The in-progress file exists only once the node is cordoned and empty.
	if n := nodeObject(e, nodes[0]); !n.Spec.Unschedulable || n.Annotations[drain.AnnotationCordoned] != "true" || n.Labels[drain.LabelState] != string(lock.InMaintenance) {
		t.Errorf("node in maintenance: unschedulable=%v annotations=%v labels=%v", n.Spec.Unschedulable, n.Annotations, n.Labels)
	}
	if pods, err := podsOn(e.Ctx, e, nodes[0]); err != nil || len(pods) != 0 {
		t.Errorf("pods still on %s when the in-progress file appeared: %v %v", nodes[0], pods, err)
	}
	if h := lockHolder(e); h != nodes[0] {
		t.Errorf("lock holder %q, want %s", h, nodes[0])
	}
	r := record(e, nodes[0])
	if r == nil || r.State != lock.InMaintenance || r.Reason != "kernel 6.1.99" || r.RequestID == "" {
		t.Errorf("record in maintenance: %+v", r)
	}
	e.RunningPods("web", 6) // the evicted pods were replaced on the other nodes

	a.finish()
	if code := a.waitExit(cluster.DefaultTimeout); code != 0 {
		t.Fatalf("agent exited %d after completing, want 0", code)
	}
	if a.inProgress() {
		t.Error("the in-progress file is still there")
	}
	n := nodeObject(e, nodes[0])
	if n.Spec.Unschedulable {
		t.Error("the node is still cordoned")
	}
	if _, ok := n.Annotations[drain.AnnotationCordoned]; ok {
		t.Error("the cordoned annotation is still there")
	}
	if _, ok := n.Labels[drain.LabelState]; ok {
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
	if code := a.waitExit(cluster.DefaultTimeout); code != 0 {
		t.Errorf("idle agent exited %d", code)
	}
}

// 2. Five agents request at once: one node at a time, in request order.
func TestAgentFiveNodesOneAtATime(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(5)
	e.Deployment("web", 10)
	e.PDB("web", "web", 8)
	e.RunningPods("web", 10)
	tl := recordTimeline(e)

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
			a.finish()
		}()
	}
	wg.Wait()
	for _, a := range agents {
		if code := a.waitExit(cluster.DefaultTimeout); code != 0 {
			t.Errorf("agent of %s exited %d", a.node, code)
		}
	}
	e.Eventually("every record to be gone from the timeline", cluster.DefaultTimeout, func(context.Context) error {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		for _, n := range nodes {
			if tl.last[n] != "" {
				return fmt.Errorf("%s is %s", n, tl.last[n])
			}
		}
		return nil
	})
	t.Logf("timeline:\n%s", tl)
	tl.checkExclusive(t, 1)

	// Grants follow the order in which the requests reached the cluster.
	grants := tl.grants()
	if len(grants) != len(nodes) {
		t.Fatalf("%d grants (%v), want %d", len(grants), grants, len(nodes))
	}
	keys := map[string]string{}
	for _, ev := range tl.snapshot() {
		if ev.state == lock.Waiting && keys[ev.node] == "" {
			keys[ev.node] = ev.key
		}
	}
	var queue []lock.Record
	for n, k := range keys {
		queue = append(queue, lock.Record{Node: n, State: lock.Waiting, Group: "default", QueueKey: k, Heartbeat: time.Now()})
	}
	var order []string
	for _, r := range lock.Queue(queue, "default", time.Now(), time.Hour) {
		order = append(order, r.Node)
	}
	if !reflect.DeepEqual(grants, order) {
		t.Errorf("grant order %v, request order %v", grants, order)
	}
	for _, n := range nodes {
		if nodeObject(e, n).Spec.Unschedulable {
			t.Errorf("%s is still cordoned", n)
		}
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
	tl.checkExclusive(t, 1)
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
		a.finish()
		if code := a.waitExit(cluster.DefaultTimeout); code != 0 {
			t.Errorf("agent of %s exited %d", a.node, code)
		}
		left = append(left[:next], left[next+1:]...)
	}
}
