package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/internal/policy"
)

// LabelTestEnv marks the nodes of one test; the test's workloads select them,
// so tests sharing a cluster never place pods on each other's nodes.
const LabelTestEnv = "test.kustodian.io/env"

// DefaultTimeout bounds every wait of an Env unless a test says otherwise.
const DefaultTimeout = 90 * time.Second

// Env is one test's isolated slice of the shared cluster: its own namespace,
// its own nodes, and helpers that fail the test with a clear message.
type Env struct {
	T         testing.TB
	ID        string // unique per test; prefixes node names
	Namespace string
	Client    kubernetes.Interface
	Config    *rest.Config
	// Kubeconfig is the path of an admin kubeconfig for the cluster, for
	// processes the test starts.
	Kubeconfig string
	Ctx        context.Context
}

// New gives the test its own namespace in the cluster started by Main. It
// fails the test (never skips it) when there is no cluster.
func New(t testing.TB) *Env {
	t.Helper()
	shared.Lock()
	cfg, client, kubeconfig := shared.config, shared.client, shared.kubeconfig
	shared.Unlock()
	if client == nil {
		t.Fatal("no control plane: call cluster.Main(m) from TestMain")
	}
	e := &Env{T: t, ID: shortID(t), Client: client, Config: rest.CopyConfig(cfg), Kubeconfig: kubeconfig, Ctx: t.Context()}
	e.Namespace = e.ID
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.Namespace, Labels: map[string]string{LabelTestEnv: e.ID}}}
	if _, err := client.CoreV1().Namespaces().Create(e.Ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", e.Namespace, err)
	}
	t.Cleanup(func() {
		// The test's context is done by now.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := client.CoreV1().Namespaces().Delete(ctx, e.Namespace, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("deleting namespace %s: %v", e.Namespace, err)
		}
	})
	return e
}

// Nodes creates n kwok nodes for this test only, named <id>-node-<i>, and
// deletes them when the test ends.
func (e *Env) Nodes(n int) []string {
	e.T.Helper()
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("%s-node-%d", e.ID, i)
		if err := CreateNode(e.Ctx, e.Client, names[i], map[string]string{LabelTestEnv: e.ID}); err != nil {
			e.T.Fatal(err)
		}
	}
	e.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, name := range names {
			if err := e.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				e.T.Errorf("deleting node %s: %v", name, err)
			}
		}
	})
	// Ready is not enough: the node lifecycle controller removes the
	// not-ready taint a moment later, and until then the scheduler skips
	// the node.
	e.Eventually(fmt.Sprintf("%d nodes to be Ready and untainted", n), DefaultTimeout, func(ctx context.Context) error {
		for _, name := range names {
			node, err := e.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !NodeReady(node) {
				return fmt.Errorf("node %s is not Ready", name)
			}
			if len(node.Spec.Taints) > 0 {
				return fmt.Errorf("node %s has taints %v", name, node.Spec.Taints)
			}
		}
		return nil
	})
	return names
}

// NodeReady reports the node's Ready condition.
func NodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Deployment creates a Deployment of pause pods, labelled app=<name>, whose
// pods run only on this test's nodes.
func (e *Env) Deployment(name string, replicas int32) *appsv1.Deployment {
	e.T.Helper()
	podLabels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{LabelTestEnv: e.ID},
					Containers:   []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}
	d, err := e.Client.AppsV1().Deployments(e.Namespace).Create(e.Ctx, d, metav1.CreateOptions{})
	if err != nil {
		e.T.Fatalf("creating deployment %s/%s: %v", e.Namespace, name, err)
	}
	return d
}

// KuredDaemonSet creates a DaemonSet standing for Kured's (named kured)
// in namespace, whose pods run nowhere, with lockValue in Kured's lock
// annotation unless it is empty. One outside the test's namespace is
// deleted when the test ends.
func (e *Env) KuredDaemonSet(namespace, lockValue string) {
	e.T.Helper()
	ds := KuredDaemonSet(namespace)
	if lockValue != "" {
		ds.Annotations[kured.LockAnnotation] = lockValue
	}
	dss := e.Client.AppsV1().DaemonSets(namespace)
	if _, err := dss.Create(e.Ctx, ds, metav1.CreateOptions{}); err != nil {
		e.T.Fatalf("creating DaemonSet %s/kured: %v", namespace, err)
	}
	if namespace != e.Namespace {
		e.T.Cleanup(func() { _ = dss.Delete(context.Background(), "kured", metav1.DeleteOptions{}) })
	}
}

// KuredDaemonSet is a DaemonSet standing for Kured's (named kured) in
// namespace, whose pods run nowhere: it carries Kured's lock.
func KuredDaemonSet(namespace string) *appsv1.DaemonSet {
	labels := map[string]string{"app": "kured"}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "kured", Namespace: namespace, Annotations: map[string]string{}},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"test.kustodian.io/nowhere": "true"},
					Containers:   []corev1.Container{{Name: "kured", Image: "kured"}},
				},
			},
		},
	}
}

// PDB creates a PodDisruptionBudget with minAvailable over pods labelled app=<app>.
func (e *Env) PDB(name, app string, minAvailable int) *policyv1.PodDisruptionBudget {
	e.T.Helper()
	min := intstr.FromInt32(int32(minAvailable))
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &min,
			Selector:     &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
		},
	}
	pdb, err := e.Client.PolicyV1().PodDisruptionBudgets(e.Namespace).Create(e.Ctx, pdb, metav1.CreateOptions{})
	if err != nil {
		e.T.Fatalf("creating PDB %s/%s: %v", e.Namespace, name, err)
	}
	return pdb
}

// Pods lists the test's pods labelled app=<app>, sorted by name.
func (e *Env) Pods(ctx context.Context, app string) ([]corev1.Pod, error) {
	list, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{"app": app}).String(),
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items, nil
}

// RunningPods waits until exactly n pods labelled app=<app> are Running and
// Ready and none is terminating, and returns them.
func (e *Env) RunningPods(app string, n int) []corev1.Pod {
	e.T.Helper()
	var pods []corev1.Pod
	e.Eventually(fmt.Sprintf("%d running pods of %s", n, app), DefaultTimeout, func(ctx context.Context) error {
		all, err := e.Pods(ctx, app)
		if err != nil {
			return err
		}
		pods = pods[:0]
		for _, p := range all {
			if p.DeletionTimestamp != nil {
				return fmt.Errorf("pod %s is terminating", p.Name)
			}
			if !PodReady(&p) {
				return fmt.Errorf("pod %s is %s, not Running and Ready", p.Name, p.Status.Phase)
			}
			pods = append(pods, p)
		}
		if len(pods) != n {
			return fmt.Errorf("%d pods, want %d", len(pods), n)
		}
		return nil
	})
	return pods
}

// PodReady reports whether the pod is Running with its Ready condition true.
func PodReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Evict asks the Eviction API to evict the pod and returns its answer.
func (e *Env) Evict(ctx context.Context, pod string) error {
	return e.Client.PolicyV1().Evictions(e.Namespace).Evict(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: e.Namespace},
	})
}

// Cordon marks the node unschedulable.
func (e *Env) Cordon(node string) {
	e.T.Helper()
	patch := []byte(`{"spec":{"unschedulable":true}}`)
	if _, err := e.Client.CoreV1().Nodes().Patch(e.Ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
		e.T.Fatalf("cordoning node %s: %v", node, err)
	}
}

// Eventually waits until cond returns nil, checking every 100 ms, and fails
// the test after timeout with what cond last said.
func (e *Env) Eventually(what string, timeout time.Duration, cond func(ctx context.Context) error) {
	e.T.Helper()
	if err := Eventually(e.Ctx, timeout, cond); err != nil {
		e.T.Fatalf("waiting for %s: %v", what, err)
	}
}

// Eventually waits until cond returns nil, checking every 100 ms. After
// timeout it returns cond's last error.
func Eventually(ctx context.Context, timeout time.Duration, cond func(ctx context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last = cond(ctx)
		return last == nil, nil
	})
	if err == nil {
		return nil
	}
	if last == nil {
		last = err
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("not done after %s: %w", timeout, last)
	}
	return fmt.Errorf("%v: %w", err, last)
}

// ApplyPolicy creates or replaces a MaintenancePolicy from YAML (its spec
// and name) in the test's namespace, and returns the API server's error.
func (e *Env) ApplyPolicy(doc string) error {
	e.T.Helper()
	var u unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		e.T.Fatalf("test policy does not parse: %v", err)
	}
	u.SetAPIVersion(policy.Group + "/" + policy.Version)
	u.SetKind(policy.Kind)
	u.SetNamespace(e.Namespace)
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		e.T.Fatal(err)
	}
	ri := dyn.Resource(policy.GVR).Namespace(e.Namespace)
	old, err := ri.Get(e.Ctx, u.GetName(), metav1.GetOptions{})
	if err == nil {
		u.SetResourceVersion(old.GetResourceVersion())
		_, err = ri.Update(e.Ctx, &u, metav1.UpdateOptions{})
		return err
	}
	_, err = ri.Create(e.Ctx, &u, metav1.CreateOptions{})
	return err
}
