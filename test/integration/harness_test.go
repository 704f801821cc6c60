package integration

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kustodian/kustodian/test/cluster"
)

// The harness is real: the scheduler places pods, the disruption controller
// keeps PDB status, the Eviction API refuses with 429 what the PDB forbids,
// and the ReplicaSet controller replaces evicted pods.
func TestHarnessEvictionHonoursPDB(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(3)
	e.Deployment("web", 6)
	e.PDB("web", "web", 5)
	pods := e.RunningPods("web", 6)
	for _, p := range pods {
		if !slices.Contains(nodes, p.Spec.NodeName) {
			t.Fatalf("pod %s runs on %q, not on one of this test's nodes %v", p.Name, p.Spec.NodeName, nodes)
		}
	}
	e.Eventually("PDB web to allow exactly one disruption", cluster.DefaultTimeout, func(ctx context.Context) error {
		pdb, err := e.Client.PolicyV1().PodDisruptionBudgets(e.Namespace).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if pdb.Status.ObservedGeneration != pdb.Generation || pdb.Status.CurrentHealthy != 6 || pdb.Status.DisruptionsAllowed != 1 {
			return fmt.Errorf("PDB status: observedGeneration %d of %d, currentHealthy %d, disruptionsAllowed %d",
				pdb.Status.ObservedGeneration, pdb.Generation, pdb.Status.CurrentHealthy, pdb.Status.DisruptionsAllowed)
		}
		return nil
	})

	// With every node cordoned, the replacement of an evicted pod cannot
	// run, so the budget stays spent until a node is uncordoned.
	for _, n := range nodes {
		e.Cordon(n)
	}
	first, second := pods[0].Name, pods[1].Name
	if err := e.Evict(e.Ctx, first); err != nil {
		t.Fatalf("evicting %s with one disruption allowed: %v", first, err)
	}
	original := map[string]bool{}
	for _, p := range pods {
		original[p.Name] = true
	}
	e.Eventually("the ReplicaSet to create a replacement for "+first, cluster.DefaultTimeout, func(ctx context.Context) error {
		current, err := e.Pods(ctx, "web")
		if err != nil {
			return err
		}
		for _, p := range current {
			if !original[p.Name] {
				return nil
			}
		}
		return fmt.Errorf("no replacement yet: %s", podSummary(current))
	})
	err := e.Evict(e.Ctx, second)
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evicting %s while the replacement of %s cannot run: got %v, want 429 TooManyRequests from the PDB", second, first, err)
	}
	uncordon(e, nodes[0])

	// Retry the second eviction until it is allowed; when it is, the
	// ReplicaSet's replacement for the first pod must be Running.
	refusals := 1
	e.Eventually("the second eviction to be allowed", cluster.DefaultTimeout, func(ctx context.Context) error {
		err := e.Evict(ctx, second)
		if apierrors.IsTooManyRequests(err) {
			refusals++
			return err
		}
		if err != nil {
			t.Fatalf("evicting %s: %v", second, err)
		}
		return nil
	})
	current, err := e.Pods(e.Ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	var replacements []string
	for _, p := range current {
		if !original[p.Name] && p.DeletionTimestamp == nil && cluster.PodReady(&p) {
			replacements = append(replacements, p.Name)
		}
	}
	if len(replacements) == 0 {
		t.Fatalf("eviction of %s was allowed while no replacement for %s was Running (pods: %s)", second, first, podSummary(current))
	}
	t.Logf("second eviction refused %d time(s), allowed once %v ran", refusals, replacements)

	// Both evictions end with six running pods again.
	for _, p := range e.RunningPods("web", 6) {
		if p.Name == first || p.Name == second {
			t.Errorf("evicted pod %s is still there", p.Name)
		}
	}
}

// A cordoned node receives no new pods, while uncordoned nodes do get spread across.
func TestHarnessCordonedNodeGetsNoNewPods(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(3)

	e.Deployment("before", 6)
	used := map[string]bool{}
	for _, p := range e.RunningPods("before", 6) {
		used[p.Spec.NodeName] = true
	}
	if len(used) < 2 {
		t.Fatalf("with no node cordoned the scheduler put all 6 pods on %v; the cordon check below would prove nothing", used)
	}

	e.Cordon(nodes[0])
	e.Cordon(nodes[1])
	e.Deployment("after", 6)
	for _, p := range e.RunningPods("after", 6) {
		if p.Spec.NodeName != nodes[2] {
			t.Errorf("pod %s was scheduled to %s, which is cordoned", p.Name, p.Spec.NodeName)
		}
	}
}

func podSummary(pods []corev1.Pod) string {
	s := ""
	for _, p := range pods {
		state := string(p.Status.Phase)
		if p.DeletionTimestamp != nil {
			state = "Terminating"
		}
		s += fmt.Sprintf("%s=%s@%s ", p.Name, state, p.Spec.NodeName)
	}
	return s
}

// The test cluster holds kubelets to their own node as production clusters
// do (Node authorizer, NodeRestriction): a kubelet's identity evicts the
// pods of its node and no other.
func TestHarnessKubeletEvictsOnlyItsOwnPods(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	a, b := nodes[0], nodes[1]
	for _, n := range nodes {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "on-" + n, Namespace: e.Namespace},
			Spec: corev1.PodSpec{NodeName: n, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}
		if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kubeletA := kubernetes.NewForConfigOrDie(e.KubeletConfig(a))
	// NodeRestriction looks the pod up in the API server's own informer,
	// which can lag a pod created a moment ago: until it has the pod, the
	// eviction is refused as not found. The pods exist (created above), so
	// a not-found is waited out, and any other answer is the verdict.
	evict := func(pod string) error {
		var verdict error
		e.Eventually("the API server's informer to see pod "+pod, 30*time.Second, func(ctx context.Context) error {
			verdict = kubeletA.PolicyV1().Evictions(e.Namespace).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: e.Namespace}})
			if apierrors.IsNotFound(verdict) {
				return verdict
			}
			return nil
		})
		return verdict
	}
	if err := evict("on-" + b); !apierrors.IsForbidden(err) {
		t.Errorf("kubelet %s evicting a pod of %s: %v, want forbidden", a, b, err)
	}
	if err := evict("on-" + a); err != nil {
		t.Errorf("kubelet %s evicting its own pod: %v", a, err)
	}
}
