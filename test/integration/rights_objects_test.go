package integration

import (
	"context"
	"maps"
	"testing"
	"time"

	authv1 "k8s.io/api/authorization/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

func toUnstructured(t *testing.T, obj runtime.Object) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func getU(t *testing.T, e *cluster.Env, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u, err := dyn.Resource(gvr).Namespace(ns).Get(e.Ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("%s %s/%s: %v", gvr.Resource, ns, name, err)
	}
	return u
}

// rightsTargets makes the objects the rows name, as an admin.
func rightsTargets(t *testing.T, e *cluster.Env, dyn dynamic.Interface, a, b string) map[string]target {
	t.Helper()
	ns := e.Namespace
	gvrNode := corev1.SchemeGroupVersion.WithResource("nodes")
	gvkNode := corev1.SchemeGroupVersion.WithKind("Node")
	gvrLease := coordv1.SchemeGroupVersion.WithResource("leases")
	gvkLease := coordv1.SchemeGroupVersion.WithKind("Lease")
	nodeA, nodeB := nodeObject(e, a), nodeObject(e, b)
	owner := func(n *corev1.Node) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}
	}
	leases := e.Client.CoordinationV1().Leases(ns)
	mkLease := func(l *coordv1.Lease) *unstructured.Unstructured {
		if _, err := leases.Create(e.Ctx, l, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return getU(t, e, dyn, gvrLease, ns, l.Name)
	}
	self, other := a, b
	now := metav1.NewMicroTime(time.Now())
	recordA := func() *unstructured.Unstructured {
		return mkLease(&coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.RecordName(a), Labels: map[string]string{lock.LabelManagedBy: "kustodian"}},
			Spec: coordv1.LeaseSpec{HolderIdentity: &self, RenewTime: &now}})
	}
	recordB := func() *unstructured.Unstructured {
		return mkLease(&coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.RecordName(b)}, Spec: coordv1.LeaseSpec{HolderIdentity: &other, RenewTime: &now}})
	}
	lockA := mkLease(&coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.GroupRef{Policy: "rights", Group: "a"}.LockName(0), OwnerReferences: owner(nodeA),
		Labels: map[string]string{lock.LabelPolicy: "rights"}, Annotations: map[string]string{lock.AnnotationGroup: "a"}},
		Spec: coordv1.LeaseSpec{HolderIdentity: &self}})
	lockB := mkLease(&coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.GroupRef{Policy: "rights", Group: "b"}.LockName(0), OwnerReferences: owner(nodeB)},
		Spec: coordv1.LeaseSpec{HolderIdentity: &other}})
	// A free lock (given back), and the queue summaries of two groups,
	// one last written by A, one by B.
	freeLock := mkLease(&coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.GroupRef{Policy: "rights", Group: "free"}.LockName(0),
		Labels: map[string]string{lock.LabelPolicy: "rights"}, Annotations: map[string]string{lock.AnnotationGroup: "free"}}})
	queue := func(group, by string) *unstructured.Unstructured {
		return mkLease(&coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.GroupRef{Policy: "rights", Group: group}.QueueName(),
			Labels: map[string]string{lock.LabelPolicy: "rights"}, Annotations: map[string]string{lock.AnnotationQueue: "[]", lock.AnnotationQueueBy: by}}})
	}
	queueA, queueB := queue("qa", a), queue("qb", b)

	// Records to create, as the agents do (each its own, holding itself).
	newRecord := func(node string) *unstructured.Unstructured {
		holder := node
		u := toUnstructured(t, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.RecordName(node) + "-new", Namespace: ns,
			Labels: map[string]string{lock.LabelManagedBy: "kustodian"}}, Spec: coordv1.LeaseSpec{HolderIdentity: &holder}})
		u.SetName(lock.RecordName(node))
		u.SetAPIVersion("coordination.k8s.io/v1")
		u.SetKind("Lease")
		return u
	}

	// Pods on A and on B, for deletes and evictions.
	pods := map[string]*corev1.Pod{}
	for _, n := range []string{a, b} {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "rights-" + n, Namespace: ns}, Spec: corev1.PodSpec{NodeName: n,
			Containers: []corev1.Container{{Name: "c", Image: "probe"}}}}
		created, err := e.Client.CoreV1().Pods(ns).Create(e.Ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pods[n] = created
	}
	rc, err := clientcmd.BuildConfigFromFlags("", nodecreds.Kubeconfig(e, a))
	if err != nil {
		t.Fatal(err)
	}
	asA := kubernetes.NewForConfigOrDie(rc)
	evict := func(n string) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			return asA.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pods[n].Name, Namespace: ns},
				DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}})
		}
	}
	event := func(n *corev1.Node) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			_, err := asA.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "rights-"},
				InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: n.Name, UID: n.UID}, Reason: "Probe", Message: "probe", Type: corev1.EventTypeNormal,
				Source: corev1.EventSource{Component: "kustodian"}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}
	}
	// A rollout, with an entry of A and one of B.
	script := writeScript(t, "true\n")
	out, err := nodecreds.CtlFor(e).Run(e.Ctx, "rollout", "create", "rights", "--script", script, "--stage", "all", "--dry-run=client", "-o", "json")
	if err != nil {
		t.Fatalf("rollout create --dry-run: %v\n%s", err, out)
	}
	applyJSON(t, e, dyn, out)
	ro := getU(t, e, dyn, rollout.GVR, ns, "rights")
	entries := []any{
		map[string]any{"name": a, "revision": "r1", "stage": int64(0), "state": rollout.Running},
		map[string]any{"name": b, "revision": "r1", "stage": int64(0), "state": rollout.Running},
	}
	if err := unstructured.SetNestedSlice(ro.Object, entries, "status", "nodes"); err != nil {
		t.Fatal(err)
	}
	const sig = "rights-signature"
	// B claimed the set of a patch campaign: A may not take it over.
	if err := unstructured.SetNestedMap(ro.Object, patchSet(b, sig, false), "status", "patch"); err != nil {
		t.Fatal(err)
	}
	ro, err = dyn.Resource(rollout.GVR).Namespace(ns).UpdateStatus(e.Ctx, ro, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Two patch campaigns: one whose set B resolved for a spec signed
	// before (A, queued, may claim it for the spec now), and one whose set
	// A claimed (A, succeeded, may fill it, once).
	campaign := func(name string, patch map[string]any, entries ...any) *unstructured.Unstructured {
		u := ro.DeepCopy()
		for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "generation", "managedFields"} {
			unstructured.RemoveNestedField(u.Object, "metadata", f)
		}
		delete(u.Object, "status")
		unstructured.RemoveNestedField(u.Object, "spec", "script")
		if err := unstructured.SetNestedField(u.Object, map[string]any{"updates": "all"}, "spec", "patch"); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedField(u.Object, sig, "spec", "signature"); err != nil {
			t.Fatal(err)
		}
		u.SetName(name)
		c, err := dyn.Resource(rollout.GVR).Namespace(ns).Create(e.Ctx, u, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.Object["status"] = map[string]any{"nodes": entries, "patch": patch}
		if c, err = dyn.Resource(rollout.GVR).Namespace(ns).UpdateStatus(e.Ctx, c, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return c
	}
	entry := func(node, state string) any {
		return map[string]any{"name": node, "revision": "r1", "stage": int64(0), "state": state}
	}
	older := campaign("rights-older", patchSet(b, "signed-before", true), entry(a, rollout.Waiting), entry(b, rollout.Succeeded))
	claimed := campaign("rights-claimed", patchSet(a, sig, false), entry(a, rollout.Succeeded), entry(b, rollout.Running))
	// And one whose set B proved for the spec now: every field of the set
	// is tried (no value given), and none may change.
	proved := campaign("rights-proved", patchSet(b, sig, true), entry(a, rollout.Waiting), entry(b, rollout.Succeeded))

	review := func(ctx context.Context) error {
		_, err := asA.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authv1.SelfSubjectAccessReview{Spec: authv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authv1.ResourceAttributes{Verb: "get", Resource: "nodes"}}}, metav1.CreateOptions{})
		return err
	}
	kuredEntry := `{"nodeID":"kustodian:` + a + `","metadata":{"unschedulable":false},"created":"2026-11-22T00:00:00Z","TTL":0}`
	gvrDS := schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}
	targets := map[string]target{
		"own Node":                   {gvr: gvrNode, gvk: gvkNode, obj: toNodeU(t, nodeA)},
		"another Node":               {gvr: gvrNode, gvk: gvkNode, obj: toNodeU(t, nodeB)},
		"pod on own Node":            {gvr: corev1.SchemeGroupVersion.WithResource("pods"), obj: toUnstructured(t, pods[a]), wholeCall: evict(a)},
		"pod on another Node":        {gvr: corev1.SchemeGroupVersion.WithResource("pods"), obj: toUnstructured(t, pods[b]), wholeCall: evict(b)},
		"Event about own Node":       {wholeCall: event(nodeA)},
		"a question about itself":    {wholeCall: review},
		"Event about another Node":   {wholeCall: event(nodeB)},
		"own record":                 {gvr: gvrLease, gvk: gvkLease, later: recordA},
		"new own record":             {gvr: gvrLease, gvk: gvkLease, obj: newRecord(a)},
		"new record of another node": {gvr: gvrLease, gvk: gvkLease, obj: newRecord(b)},
		"another record":             {gvr: gvrLease, gvk: gvkLease, later: recordB},
		"lock held by self": {gvr: gvrLease, gvk: gvkLease, obj: lockA,
			values: map[string]any{"spec.holderIdentity": ""}},
		"free lock":                             {gvr: gvrLease, gvk: gvkLease, obj: freeLock},
		"queue summary written by self":         {gvr: gvrLease, gvk: gvkLease, obj: queueA},
		"queue summary written by another node": {gvr: gvrLease, gvk: gvkLease, obj: queueB},
		"lock held by another node": {gvr: gvrLease, gvk: gvkLease, obj: lockB,
			values: map[string]any{"spec.holderIdentity": a}},
		"Kured's DaemonSet": {gvr: gvrDS, gvk: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "DaemonSet"}, obj: getU(t, e, dyn, gvrDS, ns, "kured"),
			values: map[string]any{"metadata.annotations[" + kured.LockAnnotation + "]": kuredEntry, "metadata.annotations[kured.dev/kured-node-lock]": kuredEntry}},
		"a MaintenanceRollout": {gvr: rollout.GVR, gvk: schema.GroupVersionKind{Group: rollout.Group, Version: rollout.Version, Kind: "MaintenanceRollout"},
			obj: ro, listKeys: map[string]string{"status.nodes": "name"}, values: map[string]any{"status.patch": patchSet(a, sig, false)}},
		"a patch campaign whose set is of a spec signed before": {gvr: rollout.GVR, gvk: schema.GroupVersionKind{Group: rollout.Group, Version: rollout.Version, Kind: "MaintenanceRollout"},
			obj: older, listKeys: map[string]string{"status.nodes": "name"}, values: map[string]any{"status.patch": patchSet(a, sig, false)}},
		"a patch campaign whose set another node proved": {gvr: rollout.GVR, gvk: schema.GroupVersionKind{Group: rollout.Group, Version: rollout.Version, Kind: "MaintenanceRollout"},
			obj: proved, listKeys: map[string]string{"status.nodes": "name"}},
		"a patch campaign whose set this node claimed": {gvr: rollout.GVR, gvk: schema.GroupVersionKind{Group: rollout.Group, Version: rollout.Version, Kind: "MaintenanceRollout"},
			obj: claimed, listKeys: map[string]string{"status.nodes": "name"}, values: map[string]any{"status.patch": patchSet(a, sig, true)}},
	}
	maps.Copy(targets, tokenTargets(asA, ns, nodeA, nodeB, pods[a]))
	maps.Copy(targets, requestTargets(t, e, dyn, a, b))
	return targets
}

// patchSet is a patch campaign's set in status.patch: claimed by node for
// the spec signed with sig, or resolved (and proven) there.
func patchSet(node, sig string, resolved bool) map[string]any {
	m := map[string]any{"revision": "r1", "signature": sig, "resolvedOn": node}
	if resolved {
		m["resolvedAt"] = "2026-11-29T10:00:00Z"
		m["packages"] = []any{map[string]any{"name": "kpt-app", "from": "1.0", "to": "2.0"}}
	}
	return m
}

// toNodeU is a Node as its status subresource and main resource see it.
func toNodeU(t *testing.T, n *corev1.Node) *unstructured.Unstructured {
	u := toUnstructured(t, n)
	u.SetAPIVersion("v1")
	u.SetKind("Node")
	return u
}
