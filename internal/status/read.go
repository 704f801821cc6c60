package status

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/policy"
)

// NotInstalledError says Kustodian's namespace does not exist.
type NotInstalledError struct{ Namespace string }

func (e *NotInstalledError) Error() string {
	return fmt.Sprintf("Kustodian is not installed in namespace %s; run kustodian-ctl install, or pass -n", e.Namespace)
}

// Reader fetches what a status is built from.
type Reader struct {
	Client     kubernetes.Interface
	Namespace  string
	StaleAfter time.Duration // 0: DefaultStaleAfter
	Now        func() time.Time
	// Kured's DaemonSet, which carries its lock ("": kube-system/kured).
	KuredNamespace, KuredDaemonSet string
	// KuredKeys are the annotations Kured's lock is read under (empty:
	// kured.LockAnnotations).
	KuredKeys []string
	// Dynamic, when set, reads the MaintenancePolicies too (Inputs.Policies).
	Dynamic dynamic.Interface
}

// Kured is the namespace and name of Kured's DaemonSet.
func (r Reader) Kured() (namespace, name string) {
	namespace, name = r.KuredNamespace, r.KuredDaemonSet
	if namespace == "" {
		namespace = kured.Namespace
	}
	if name == "" {
		name = kured.DaemonSet
	}
	return namespace, name
}

func (r Reader) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// Read lists the namespace's Leases and the Nodes (one LIST each) and gets
// the control ConfigMap and Kured's DaemonSet.
func (r Reader) Read(ctx context.Context) (MaintenanceStatus, error) {
	in, err := r.Inputs(ctx)
	if err != nil {
		return MaintenanceStatus{}, err
	}
	return Build(in), nil
}

// Inputs fetches the objects without building the status.
func (r Reader) Inputs(ctx context.Context) (Inputs, error) {
	in := Inputs{Namespace: r.Namespace, StaleAfter: r.StaleAfter}
	if in.StaleAfter == 0 {
		in.StaleAfter = DefaultStaleAfter
	}
	if err := r.CheckInstalled(ctx); err != nil {
		return in, err
	}
	leases, err := r.Client.CoordinationV1().Leases(r.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, Explain(err, "list", "leases.coordination.k8s.io", r.Namespace)
	}
	in.Leases = leases.Items
	nodes, err := r.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return in, Explain(err, "list", "nodes", "")
	}
	in.Nodes = nodes.Items
	cm, err := r.Client.CoreV1().ConfigMaps(r.Namespace).Get(ctx, lock.ControlConfigMap, metav1.GetOptions{})
	switch {
	case err == nil:
		in.Control = cm
	case apierrors.IsNotFound(err):
	default:
		return in, Explain(err, "get", "configmaps", r.Namespace)
	}
	in.KuredKeys = r.KuredKeys
	in.Kured, err = r.kuredDaemonSet(ctx)
	if err != nil {
		return in, err
	}
	in.Policies, err = r.ReadPolicies(ctx)
	switch {
	case apierrors.IsForbidden(errors.Unwrap(err)):
		// The status goes without; what needs them (ETAs, plan) says so.
		in.PoliciesErr = err
	case err != nil:
		return in, err
	}
	in.Now = r.now()
	return in, nil
}

// ReadPolicies lists the MaintenancePolicies (none without a dynamic
// client, or without the CRD: every node follows the built-in default). A
// policy that does not decode stands for itself as unreadable.
func (r Reader) ReadPolicies(ctx context.Context) ([]*policy.MaintenancePolicy, error) {
	if r.Dynamic == nil {
		return nil, nil
	}
	list, err := r.Dynamic.Resource(policy.GVR).Namespace(r.Namespace).List(ctx, metav1.ListOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, Explain(err, "list", "maintenancepolicies", r.Namespace)
	}
	var out []*policy.MaintenancePolicy
	for i := range list.Items {
		p, err := policy.FromUnstructured(&list.Items[i])
		if err != nil {
			p = policy.Unreadable(list.Items[i].GetName(), err)
		}
		out = append(out, p)
	}
	return out, nil
}

// CheckInstalled fails with ErrNotInstalled when the namespace is missing,
// and with an explanation when the API server cannot be used.
func (r Reader) CheckInstalled(ctx context.Context) error {
	_, err := r.Client.CoreV1().Namespaces().Get(ctx, r.Namespace, metav1.GetOptions{})
	switch {
	case err == nil, apierrors.IsForbidden(err): // reading namespaces is not needed otherwise
		return nil
	case apierrors.IsNotFound(err):
		return &NotInstalledError{Namespace: r.Namespace}
	default:
		return Explain(err, "get", "namespaces", "")
	}
}

func (r Reader) kuredDaemonSet(ctx context.Context) (*appsv1.DaemonSet, error) {
	ns, name := r.Kured()
	ds, err := r.Client.AppsV1().DaemonSets(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return ds, nil
	case apierrors.IsNotFound(err), apierrors.IsForbidden(err):
		// Not installed, or not ours to see: the status goes without it.
		return nil, nil
	default:
		return nil, Explain(err, "get", "daemonsets", ns)
	}
}

// Explain turns an API error into one line that says what to do.
func Explain(err error, verb, resource, namespace string) error {
	where := ""
	if namespace != "" {
		where = " in namespace " + namespace
	}
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("forbidden: your credentials may not %s %s%s; ask for that RBAC permission (%w)", verb, resource, where, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("unauthorized: the API server rejected your credentials; check --kubeconfig and --context (%w)", err)
	case isUnreachable(err):
		return fmt.Errorf("cannot reach the API server: %w", err)
	default:
		return fmt.Errorf("%s %s%s: %w", verb, resource, where, err)
	}
}

func isUnreachable(err error) bool {
	var status apierrors.APIStatus
	return !errors.As(err, &status) // no answer from the server at all
}
