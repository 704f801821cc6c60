package agent

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/drain"
	"github.com/kustodian/kustodian/internal/nodemarks"
	"github.com/kustodian/kustodian/internal/policy"
)

// ReasonPodDeletedPastPDB is on the pod and on the node: the pod was
// deleted, its PodDisruptionBudget bypassed, as a policy's spec.drain
// allows.
const ReasonPodDeletedPastPDB = "PodDeletedPastPDB"

// escalationState is what the agent keeps of a drain's escalation; the
// drain's goroutine reads it under Agent.mu.
type escalationState struct {
	escalate       []policy.DrainEscalation // the rules of the drain's policy
	escalatePolicy string
	nodeUID        types.UID
	escalated      []string // the pods deleted past their budget, for the history
	// quarantined is the request this agent quarantined its node for: the
	// record says it is released, as after an admin's release.
	quarantined string
}

// escalation is what the drainer asks once drain.timeout has passed: the
// rules of the policy the drain started under.
func (a *Agent) escalation() *drain.Escalation {
	return &drain.Escalation{Allowed: a.escalationAllowed, Deleted: a.deletedPastPDB}
}

// escalationAllowed says whether the policy lets pods of namespace be
// deleted past their PodDisruptionBudget.
func (a *Agent) escalationAllowed(ctx context.Context, namespace string) (bool, error) {
	a.drain.mu.Lock()
	rules := a.drain.escalate
	a.drain.mu.Unlock()
	if len(rules) == 0 {
		return false, nil
	}
	ns, err := a.kube.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("reading namespace %s for spec.drain.escalate: %w", namespace, err)
	}
	for _, r := range rules {
		if r.Action != policy.EscalateDeletePods {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(r.NamespaceSelector)
		if err != nil || r.NamespaceSelector == nil {
			continue // policy.Validate refuses it
		}
		if sel.Matches(labels.Set(ns.Labels)) {
			return true, nil
		}
	}
	return false, nil
}

// deletedPastPDB tells of a pod the escalation deleted: an Event on the
// pod and one on the node, and a line in the maintenance's history.
func (a *Agent) deletedPastPDB(ctx context.Context, namespace, name, why string) {
	line := fmt.Sprintf("%s/%s (%s)", namespace, name, why)
	a.drain.mu.Lock()
	a.drain.escalated = append(a.drain.escalated, line)
	uid := a.drain.nodeUID
	a.drain.mu.Unlock()
	msg := fmt.Sprintf("deleted pod %s/%s on node %s past its PodDisruptionBudget after drain.timeout, as MaintenancePolicy %s's spec.drain.escalate allows (%s)",
		namespace, name, a.node, a.decisionPolicy(), why)
	a.applyEffects(ctx, uid, nil, []decide.Effect{
		{Event: ReasonPodDeletedPastPDB, Warning: true, Message: msg, Pod: namespace + "/" + name},
		{Event: ReasonPodDeletedPastPDB, Warning: true, Message: msg}})
}

// decisionPolicy is the name of the node's policy, read under the lock
// for the drain's goroutine.
func (a *Agent) decisionPolicy() string {
	a.drain.mu.Lock()
	defer a.drain.mu.Unlock()
	return a.drain.escalatePolicy
}

// quarantinedNode reports whether the node carries a policy's quarantine
// mark.
func quarantinedNode(node *corev1.Node) bool {
	return node != nil && node.Annotations[nodemarks.AnnotationQuarantined] != ""
}
