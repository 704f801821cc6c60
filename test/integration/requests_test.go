package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/request"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// A maintenance asked from the cluster: kustodian-ctl request makes a
// MaintenanceRequest, the node's agent takes it through the queue (behind
// a node whose host asked first), drains the node and holds it until
// kustodian-ctl done; with --for it gives the node back by itself. The
// request's status says each phase.
func TestAMaintenanceAskedFromTheCluster(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	a, b := nodes[0], nodes[1]
	nodecreds.Install(e, e.Namespace)
	dyn := dynamicClient(t, e)
	// MaintenanceRequests are cluster-wide: this test's go with it.
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = dyn.Resource(request.GVR).DeleteCollection(context.Background(), metav1.DeleteOptions{},
				metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", n).String()})
		}
	})
	pa := newAgent(t, e, a, "--cluster-requests-enabled")
	pb := newAgent(t, e, b, "--cluster-requests-enabled")
	pa.start()
	pb.start()

	// B's host asks first and holds the lock.
	pb.request("kernel")
	pb.waitInProgress(cluster.DefaultTimeout)
	out := mustCtl(t, e, "request", a, "--reason", "disk swap")
	if !strings.Contains(out, "maintenance of node "+a+" requested (maintenancerequest/"+a+"-") || !strings.Contains(out, "until kustodian-ctl done "+a) {
		t.Fatalf("kustodian-ctl request: %s", out)
	}
	waitPhase(e, dyn, a, request.Waiting)
	waitRecord(e, a, "waiting behind "+b, inStateSaying(lock.Waiting, b))
	if nodeObject(e, a).Spec.Unschedulable {
		t.Fatal(a + " cordoned while " + b + " holds the lock")
	}
	pb.finish()
	first := waitPhase(e, dyn, a, request.InMaintenance)
	if started, _, _ := unstructured.NestedString(first.Object, "status", "startedAt"); started == "" {
		t.Errorf("no status.startedAt: %v", first.Object["status"])
	}
	waitRecord(e, a, "in maintenance for the request", inStateSaying(lock.InMaintenance, "kustodian-ctl done "+a))
	if !nodeObject(e, a).Spec.Unschedulable || lockHolder(e) != a {
		t.Fatalf("%s in maintenance, but cordoned %v and the lock held by %q", a, nodeObject(e, a).Spec.Unschedulable, lockHolder(e))
	}
	eventSays(e, a, "MaintenanceRequested", "disk swap (asked by ")
	// A's host asks meanwhile: the held cluster request keeps the node,
	// and the host's request comes after it, a maintenance of its own.
	pa.request("kernel")
	waitRecord(e, a, "still in maintenance for the request", inStateSaying(lock.InMaintenance, "kustodian-ctl done "+a))
	if p := waitPhase(e, dyn, a, request.InMaintenance); p.GetUID() != first.GetUID() {
		t.Fatal("another request")
	}

	out = mustCtl(t, e, "done", a)
	if !strings.Contains(out, "maintenance of node "+a+" done: maintenancerequest/"+first.GetName()+" deleted") {
		t.Fatalf("kustodian-ctl done: %s", out)
	}
	// The host's request: through Completing, then a maintenance of its
	// own (the script's turn), then back.
	waitRecord(e, a, "in maintenance for the host's request", inStateSaying(lock.InMaintenance, pa.requestFile()))
	pa.finish()
	waitRecord(e, a, "given back", func(r *lock.Record) error {
		if r != nil {
			return fmt.Errorf("state %s", r.State)
		}
		return nil
	})
	if nodeObject(e, a).Spec.Unschedulable {
		t.Error(a + " still cordoned after done")
	}
	if _, err := ctl(t, e, "done", a); err == nil {
		t.Error("done without a request succeeded")
	}

	// --for: the node is given back that long after it was drained.
	mustCtl(t, e, "request", a, "--reason", "firmware", "--for", "5s")
	done := waitPhase(e, dyn, a, request.Completed)
	started, _, _ := unstructured.NestedString(done.Object, "status", "startedAt")
	completed, _, _ := unstructured.NestedString(done.Object, "status", "completedAt")
	s, err1 := time.Parse(time.RFC3339, started)
	c, err2 := time.Parse(time.RFC3339, completed)
	if err1 != nil || err2 != nil || c.Sub(s) < 5*time.Second {
		t.Errorf("held from %q to %q, want 5s at least", started, completed)
	}
	if nodeObject(e, a).Spec.Unschedulable {
		t.Error(a + " still cordoned after its request's 5s")
	}
	if !pa.running() || !pb.running() {
		t.Error("an agent with clusterRequests.enabled exited")
	}
}

// waitPhase waits until node's one MaintenanceRequest is in phase, and
// returns it.
func waitPhase(e *cluster.Env, dyn dynamic.Interface, node, phase string) *unstructured.Unstructured {
	e.T.Helper()
	var got *unstructured.Unstructured
	e.Eventually("the MaintenanceRequest of "+node+" "+phase, 2*cluster.DefaultTimeout, func(ctx context.Context) error {
		list, err := dyn.Resource(request.GVR).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
		if err != nil {
			return err
		}
		if len(list.Items) != 1 {
			return fmt.Errorf("%d MaintenanceRequests", len(list.Items))
		}
		if p, _, _ := unstructured.NestedString(list.Items[0].Object, "status", "phase"); p != phase {
			return fmt.Errorf("phase %q", p)
		}
		got = &list.Items[0]
		return nil
	})
	return got
}
