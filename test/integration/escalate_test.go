package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/nodemarks"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// stuckPods runs n pods of app in namespace on node only, under a
// PodDisruptionBudget that allows no disruption: no eviction of them ever
// succeeds. It returns their UIDs by name.
func stuckPods(t *testing.T, e *cluster.Env, namespace, app, node string, n int32) map[string]string {
	t.Helper()
	all := intstr.FromInt32(n)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: namespace},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &all, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
	if _, err := e.Client.PolicyV1().PodDisruptionBudgets(namespace).Create(e.Ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return runPodsOn(t, e, namespace, app, node, n)
}

// runPodsOn runs n pods of app (labelled app=<app>) in namespace on node only,
// waits until they are Ready there, and returns their UIDs by name.
func runPodsOn(t *testing.T, e *cluster.Env, namespace, app, node string, n int32) map[string]string {
	t.Helper()
	podLabels := map[string]string{"app": app}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: app, Namespace: namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &n,
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{cluster.LabelTestEnv: e.ID, corev1.LabelHostname: node},
					Containers:   []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}
	if _, err := e.Client.AppsV1().Deployments(namespace).Create(e.Ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	uids := map[string]string{}
	e.Eventually(fmt.Sprintf("%d running pods of %s/%s on %s", n, namespace, app, node), cluster.DefaultTimeout, func(ctx context.Context) error {
		list, err := e.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return err
		}
		clear(uids)
		for _, p := range list.Items {
			if p.Spec.NodeName != node || !cluster.PodReady(&p) {
				return fmt.Errorf("pod %s on %q, phase %s", p.Name, p.Spec.NodeName, p.Status.Phase)
			}
			uids[p.Name] = string(p.UID)
		}
		if len(uids) != int(n) {
			return fmt.Errorf("%d pods", len(uids))
		}
		return nil
	})
	return uids
}

// podGone reports whether the pod of that name and UID no longer exists.
func podGone(ctx context.Context, e *cluster.Env, namespace, name, uid string) (bool, error) {
	p, err := e.Client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return string(p.UID) != uid, nil
}

func namespace(t *testing.T, e *cluster.Env, name string, labels map[string]string) {
	t.Helper()
	_, err := e.Client.CoreV1().Namespaces().Create(e.Ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Client.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// A drain that times out on pods their PodDisruptionBudget holds is
// escalated as its policy allows: the pods in the namespaces it names are
// deleted (an Event on each pod and on the node, a line in the history);
// a pod elsewhere is never deleted, and holds the node after a second
// timeout.
func TestDrainEscalationDeletesOnlyNamedNamespaces(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	nodecreds.Install(e, e.Namespace)
	e.Cordon(nodes[1])
	batch := e.Namespace + "-batch"
	namespace(t, e, batch, map[string]string{"kustodian.io/escalate": "true"})
	jobs := stuckPods(t, e, batch, "jobs", nodes[0], 2)
	db := stuckPods(t, e, e.Namespace, "db", nodes[0], 1)
	if err := e.ApplyPolicy(`
metadata: {name: escalating}
spec:
  drain:
    escalate: [{action: deletePods, namespaceSelector: {matchLabels: {kustodian.io/escalate: "true"}}}]
`); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, e, nodes[0], "--drain-timeout", "3s")
	a.request("kernel")
	a.start()
	for name, uid := range jobs {
		e.Eventually("pod "+batch+"/"+name+" deleted past its PDB", cluster.DefaultTimeout, func(ctx context.Context) error {
			gone, err := podGone(ctx, e, batch, name, uid)
			if err != nil || !gone {
				return fmt.Errorf("still there (%v)", err)
			}
			return nil
		})
		e.Eventually("an Event on pod "+name, cluster.DefaultTimeout, func(ctx context.Context) error {
			evs, err := e.Client.CoreV1().Events(batch).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=PodDeletedPastPDB"})
			if err != nil || len(evs.Items) != 1 || !strings.Contains(evs.Items[0].Message, "escalating") {
				return fmt.Errorf("events %v (%v)", evs, err)
			}
			return nil
		})
	}
	waitRecord(e, nodes[0], "Failed with the db pod left", func(r *lock.Record) error {
		if r.State != lock.Failed || !strings.Contains(r.Message, "would not go") || !strings.Contains(r.Message, e.Namespace+"/db-") || strings.Contains(r.Message, batch) {
			return fmt.Errorf("%s: %s", r.State, r.Message)
		}
		return nil
	})
	for name, uid := range db {
		if gone, err := podGone(e.Ctx, e, e.Namespace, name, uid); err != nil || gone {
			t.Errorf("pod %s/%s of a namespace the policy does not name was deleted (%v)", e.Namespace, name, err)
		}
	}
	evs, err := e.Client.CoreV1().Events(metav1.NamespaceDefault).List(e.Ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + nodes[0] + ",reason=PodDeletedPastPDB"})
	if err != nil || len(evs.Items) != 2 {
		t.Errorf("Events PodDeletedPastPDB on the node: %d (%v), want 2", len(evs.Items), err)
	}
	// The operator repairs the node: the maintenance's history names the
	// pods deleted.
	a.completes()
	if h := nodeObject(e, nodes[0]).Annotations["kustodian.io/history"]; !strings.Contains(h, `"escalated":[`) || !strings.Contains(h, batch+"/jobs-") {
		t.Errorf("the node's history does not name the deleted pods: %s", h)
	}
}

// Quarantine: a node whose drain timed out gives its lock to the next
// node and stays cordoned and marked; at the policy's cap the next such
// node keeps its lock and the rollout stops there; once its request is
// withdrawn the quarantined node is given back and unmarked.
func TestDrainQuarantineLetsTheNextNodeGoUpToTheCap(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(3)
	nodecreds.Install(e, e.Namespace)
	stuckPods(t, e, e.Namespace, "db0", nodes[0], 1)
	stuckPods(t, e, e.Namespace, "db1", nodes[1], 1)
	if err := e.ApplyPolicy(`
metadata: {name: quarantining}
spec:
  drain: {quarantine: {maxNodes: 1}}
`); err != nil {
		t.Fatal(err)
	}
	var agents []*agentProc
	for _, n := range nodes {
		a := newAgent(t, e, n, "--drain-timeout", "2s")
		a.request("kernel")
		a.start()
		// The queue's order is the order the records were made in.
		waitRecord(e, n, "in the queue", func(r *lock.Record) error {
			if r == nil || r.State == lock.Idle || r.State == "" {
				return fmt.Errorf("no record yet")
			}
			return nil
		})
		agents = append(agents, a)
	}
	waitRecord(e, nodes[0], "quarantined", inStateSaying(lock.Failed, "quarantined: the drain timed out; pod "+e.Namespace+"/db0-"))
	eventSays(e, nodes[0], "Quarantined", "db0-")
	n0 := nodeObject(e, nodes[0])
	if !n0.Spec.Unschedulable || n0.Annotations[nodemarks.AnnotationQuarantined] != "quarantining" {
		t.Errorf("the quarantined node: cordoned %v, annotations %v", n0.Spec.Unschedulable, n0.Annotations)
	}
	waitRecord(e, nodes[1], "held at the cap", inStateSaying(lock.Failed, "not quarantined: 1 of 1 nodes of policy quarantining quarantined already ("+nodes[0]+")"))
	if h := groupLockHolder(e, lock.GroupRef{Policy: "quarantining"}); h != nodes[1] {
		t.Errorf("lock held by %q, want %s, which reached the cap", h, nodes[1])
	}
	waitRecord(e, nodes[2], "still waiting behind the stopped rollout", inState(lock.Waiting))

	// The operator deals with node 0 and withdraws its request.
	agents[0].completes()
	n0 = nodeObject(e, nodes[0])
	if n0.Spec.Unschedulable || n0.Annotations[nodemarks.AnnotationQuarantined] != "" {
		t.Errorf("after its request went, node 0: cordoned %v, annotations %v", n0.Spec.Unschedulable, n0.Annotations)
	}
}

// What the escalation may do, and a compromised node no more: delete
// pods on its own Node only, with the pod's UID as a precondition and its
// own grace period; record an Event about a pod only as the escalation
// writes it, from its own host.
func TestSecurityEscalationDeletesOnlyItsOwnPods(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	nodecreds.Install(e, e.Namespace)
	mine := stuckPods(t, e, e.Namespace, "mine", nodes[0], 1)
	theirs := stuckPods(t, e, e.Namespace, "theirs", nodes[1], 1)
	pods := clientFor(t, nodecreds.Kubeconfig(e, nodes[0])).CoreV1()
	withUID := func(uid string) metav1.DeleteOptions {
		u := types.UID(uid)
		return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &u}}
	}
	// install cannot prove the pods policy in force (it deletes no pod):
	// wait until the API server refuses a dry run by it, then judge.
	for name, uid := range theirs {
		inForce(e, "pods", "may delete only pods on its own Node", func(ctx context.Context) error {
			dry := withUID(uid)
			dry.DryRun = []string{metav1.DryRunAll}
			return pods.Pods(e.Namespace).Delete(ctx, name, dry)
		})
		denied(t, "delete a pod on another Node", pods.Pods(e.Namespace).Delete(e.Ctx, name, withUID(uid)), "may delete only pods on its own Node")
	}
	for name, uid := range mine {
		denied(t, "delete its own pod without its UID", pods.Pods(e.Namespace).Delete(e.Ctx, name, metav1.DeleteOptions{}), "only with its UID as a precondition")
		now := int64(0)
		at := withUID(uid)
		at.GracePeriodSeconds = &now
		denied(t, "delete its own pod at once", pods.Pods(e.Namespace).Delete(e.Ctx, name, at), "its own grace period")
		ev := func(host, msg string) error {
			_, err := pods.Events(e.Namespace).Create(e.Ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "forged-"},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: e.Namespace, Name: name}, Reason: "PodDeletedPastPDB", Type: corev1.EventTypeWarning,
				Message: msg, Source: corev1.EventSource{Component: "kustodian", Host: host}}, metav1.CreateOptions{})
			return err
		}
		denied(t, "an Event about a pod from another host", ev(nodes[1], "deleted pod x"), "may record Events only about its own Node")
		denied(t, "an Event about a pod saying anything", ev(nodes[0], "all is well"), "may record Events only about its own Node")
		if err := ev(nodes[0], "deleted pod "+name); err != nil {
			t.Errorf("the escalation's Event about its pod: %v", err)
		}
		if err := pods.Pods(e.Namespace).Delete(e.Ctx, name, withUID(uid)); err != nil {
			t.Errorf("deleting its own pod as the escalation does: %v", err)
		}
	}
}
