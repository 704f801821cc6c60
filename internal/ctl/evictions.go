package ctl

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"

	"github.com/kustodian/kustodian/internal/status"
)

// RefusedEviction is a pod on a node whose eviction the API server refuses
// now: a PodDisruptionBudget allows no disruption, or two of them cover
// the pod.
type RefusedEviction struct {
	Pod    string `json:"pod"` // namespace/name
	Reason string `json:"reason"`
}

// drainedPods are the pods a drain would evict from node: not those a
// DaemonSet runs (the drain ignores them), not mirror pods (the kubelet's
// static pods), not those that ended or are being deleted.
func drainedPods(ctx context.Context, client kubernetes.Interface, node string) ([]corev1.Pod, error) {
	list, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if err != nil {
		return nil, status.Explain(err, "list", "pods", "")
	}
	var out []corev1.Pod
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if _, mirror := p.Annotations[corev1.MirrorPodAnnotationKey]; mirror {
			continue
		}
		if c := metav1.GetControllerOf(&p); c != nil && c.Kind == "DaemonSet" {
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// refusedEvictions asks the API server, for each pod a drain of node would
// evict, whether it would evict it now: the Eviction API with dryRun=All,
// which checks the PodDisruptionBudgets as a real eviction does and
// changes nothing. Its answer, not our own arithmetic on the budgets'
// status, is what the drain will meet.
func refusedEvictions(ctx context.Context, client kubernetes.Interface, node string) ([]RefusedEviction, error) {
	pods, err := drainedPods(ctx, client, node)
	if err != nil {
		return nil, err
	}
	var out []RefusedEviction
	for _, p := range pods {
		ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
			DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}}
		err := client.PolicyV1().Evictions(p.Namespace).Evict(ctx, ev)
		switch {
		case err == nil, apierrors.IsNotFound(err): // evictable, or gone
		case refusedByBudget(err):
			out = append(out, RefusedEviction{Pod: p.Namespace + "/" + p.Name, Reason: evictionReason(err)})
		case apierrors.IsForbidden(err):
			return nil, fmt.Errorf("forbidden: the dry-run eviction of pod %s/%s, which plan sends to find the pods a PodDisruptionBudget keeps, was refused (your credentials may lack create on pods/eviction in that namespace, or an admission webhook or the budget itself refused it): %w", p.Namespace, p.Name, err)
		default:
			// Throttling, a webhook's or etcd's error: not a budget's answer.
			return nil, status.Explain(err, "create", "pods/eviction (dry run)", p.Namespace)
		}
	}
	return out, nil
}

// refusedByBudget tells the Eviction API's refusals for a budget from
// other errors of the same codes: 429 with the cause DisruptionBudget (the
// budget allows no disruption now, or is not computed yet), and the 500 it
// answers for a pod that more than one budget covers. A 429 from the
// server's flow control, or any other 500, is not one.
func refusedByBudget(err error) bool {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return false
	}
	st := se.Status()
	switch {
	case apierrors.IsTooManyRequests(err):
		if st.Details != nil {
			for _, c := range st.Details.Causes {
				if c.Type == policyv1.DisruptionBudgetCause {
					return true
				}
			}
		}
	case apierrors.IsInternalError(err):
		return strings.Contains(st.Message, "more than one PodDisruptionBudget")
	}
	return false
}

// evictionReason is the API server's refusal in one line: its message and
// the causes it gives (which budget, how many pods it needs).
func evictionReason(err error) string {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return err.Error()
	}
	st := se.Status()
	parts := []string{strings.TrimSuffix(st.Message, ".")}
	if st.Details != nil {
		for _, c := range st.Details.Causes {
			if c.Message != "" {
				parts = append(parts, strings.TrimSuffix(c.Message, "."))
			}
		}
	}
	return status.Printable(strings.Join(parts, ": "))
}
