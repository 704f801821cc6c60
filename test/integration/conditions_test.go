package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// conditionsOf are the Node's maintenance conditions' statuses, read from
// the API server.
func conditionsOf(e *cluster.Env, node string) map[corev1.NodeConditionType]corev1.ConditionStatus {
	out := map[corev1.NodeConditionType]corev1.ConditionStatus{}
	for _, c := range nodeObject(e, node).Status.Conditions {
		out[c.Type] = c.Status
	}
	return out
}

func conditionsAre(e *cluster.Env, node, what string, want map[corev1.NodeConditionType]corev1.ConditionStatus) {
	e.T.Helper()
	e.Eventually(node+" "+what, cluster.DefaultTimeout, func(context.Context) error {
		got := conditionsOf(e, node)
		for t, s := range want {
			if got[t] != s {
				return fmt.Errorf("%s is %q, want %s (conditions %v)", t, got[t], s, got)
			}
		}
		return nil
	})
}

// The agent sets Kubernetes' four Node maintenance conditions through a
// maintenance, and they survive the kubelet's own status update.
func TestNodeConditionsThroughAMaintenance(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(1)
	n := nodes[0]
	a := newAgent(t, e, n)
	a.request("kernel")
	a.start()
	a.waitInProgress(cluster.DefaultTimeout)
	T, F := corev1.ConditionTrue, corev1.ConditionFalse
	conditionsAre(e, n, "in maintenance", map[corev1.NodeConditionType]corev1.ConditionStatus{
		corev1.NodeMaintenancePlanned: F, corev1.NodeDrainInProgress: F, corev1.NodeDrained: T, corev1.NodeMaintenanceInProgress: T})
	// kwok, standing in for the kubelet here, does not update a Ready
	// Node's status again (its heartbeats go to the node Lease); the
	// kubelet's own status update is made as the kubelet makes it, a
	// strategic merge patch of its conditions, with its identity.
	kubelet, err := kubernetes.NewForConfig(e.KubeletConfig(n))
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.Now().UTC().Format("2006-01-02T15:04:05Z")
	ready := fmt.Sprintf(`{"status":{"conditions":[{"type":"Ready","status":"True","reason":"KubeletReady","message":"kubelet is posting ready status","lastHeartbeatTime":%q}]}}`, now)
	if _, err := kubelet.CoreV1().Nodes().Patch(e.Ctx, n, types.StrategicMergePatchType, []byte(ready), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("the kubelet's status update: %v", err)
	}
	if got := conditionsOf(e, n); got[corev1.NodeMaintenanceInProgress] != T || got[corev1.NodeDrained] != T || got[corev1.NodeReady] != T {
		t.Fatalf("after the kubelet's status update the conditions are %v", got)
	}
	a.completes()
	conditionsAre(e, n, "back", map[corev1.NodeConditionType]corev1.ConditionStatus{
		corev1.NodeMaintenancePlanned: F, corev1.NodeDrainInProgress: F, corev1.NodeDrained: F, corev1.NodeMaintenanceInProgress: F})
}

// A node may set only the four maintenance conditions, only on its own
// Node: not another node's, not the kubelet's, not any other status field.
func TestNodeStatusIsHeldToTheMaintenanceConditions(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	nodecreds.Install(e, e.Namespace)
	cfg, err := clientcmd.BuildConfigFromFlags("", nodecreds.Kubeconfig(e, nodes[0]))
	if err != nil {
		t.Fatal(err)
	}
	asA, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	patch := func(node, body string) error {
		_, err := asA.CoreV1().Nodes().Patch(e.Ctx, node, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}, "status")
		return err
	}
	// An admin's hold on A, which A must not lift.
	if _, err := e.Client.CoreV1().Nodes().Patch(e.Ctx, nodes[0], types.MergePatchType, []byte(`{"metadata":{"annotations":{"kustodian.io/hold":"backup"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	ours := `{"status":{"conditions":[{"type":"MaintenancePlanned","status":"True","reason":"Waiting","message":"test"}]}}`
	if err := patch(nodes[0], ours); err != nil {
		t.Fatalf("node A setting its own maintenance condition: %v", err)
	}
	for what, tc := range map[string]struct{ node, body, want string }{
		"another node's condition": {nodes[1], ours, "may change only the status of its own Node"},
		"the kubelet's Ready":      {nodes[0], `{"status":{"conditions":[{"type":"Ready","status":"False","reason":"x","message":"x"}]}}`, "may set only the conditions"},
		"its capacity":             {nodes[0], `{"status":{"capacity":{"pods":"1"}}}`, "may change only the maintenance conditions in the status of its Node, not capacity"},
		// A status write keeps the metadata it is sent: none of it may
		// change through this door (seen open: each of these was accepted).
		"a label NodeRestriction protects": {nodes[0], `{"metadata":{"labels":{"node-restriction.kubernetes.io/pci":"true"}}}`, "may not change the metadata of its Node through its status, not labels"},
		"an admin's hold removed":          {nodes[0], `{"metadata":{"annotations":{"kustodian.io/hold":null}}}`, "through its status, not annotations"},
		"its own priority":                 {nodes[0], `{"metadata":{"annotations":{"kustodian.io/priority":"2147483647"}}}`, "through its status, not annotations"},
		"a finalizer":                      {nodes[0], `{"metadata":{"finalizers":["example.com/keep"]}}`, "through its status, not finalizers"},
		"an owner":                         {nodes[0], `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"Node","name":"` + nodes[1] + `","uid":"` + string(nodeObject(e, nodes[1]).UID) + `"}]}}`, "through its status, not ownerReferences"},
		"its state label through status":   {nodes[0], `{"metadata":{"labels":{"kustodian.io/state":"Draining"}}}`, "through its status, not labels"},
	} {
		err := patch(tc.node, tc.body)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("node A, %s: %v, want refused saying %q", what, err, tc.want)
		}
	}
	if n := nodeObject(e, nodes[0]); n.Annotations["kustodian.io/hold"] != "backup" || len(n.Finalizers) != 0 || n.Labels["node-restriction.kubernetes.io/pci"] != "" {
		t.Errorf("node A's metadata changed through its status: %v %v %v", n.Labels, n.Annotations, n.Finalizers)
	}
}
