package agent

import (
	"context"
	"fmt"
	"strings"

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

// quarantineFull counts, on a fresh read of the Nodes, the other nodes of
// the policy that are quarantined; it says why no more may be, or "". A
// node counts only if it is cordoned, its mark names the policy, and the
// policy is its own (resolved as its agent resolves it, from the same
// policies): any node can write the mark on itself, under any policy's
// name, and a compromised one would otherwise use up another policy's
// places, so that the nodes of that policy whose drain times out keep
// their locks. A node holds at most one place, of its own policy's cap.
func (a *Agent) quarantineFull(ctx context.Context, p policy.Effective) (string, error) {
	list, err := a.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("counting the quarantined nodes: %w", err)
	}
	policies := a.policies()
	var names []string
	for _, n := range list.Items {
		if n.Name == a.node || n.Annotations[nodemarks.AnnotationQuarantined] != p.Name || !n.Spec.Unschedulable {
			continue
		}
		if policy.Resolve(policies, n.Labels).Name != p.Name {
			continue
		}
		names = append(names, n.Name)
	}
	if limit := p.Spec.Drain.Quarantine.QuarantineCap(); len(names) >= limit {
		return fmt.Sprintf("%d of %d nodes of policy %s quarantined already (%s)", len(names), limit, p.Name, strings.Join(names, ", ")), nil
	}
	return "", nil
}

// quarantinedNode reports whether the node carries a policy's quarantine
// mark.
func quarantinedNode(node *corev1.Node) bool {
	return node != nil && node.Annotations[nodemarks.AnnotationQuarantined] != ""
}

// unquarantine takes the quarantine mark off the node once it is back.
func (a *Agent) unquarantine(ctx context.Context, node *corev1.Node) error {
	if _, ok := node.Annotations[nodemarks.AnnotationQuarantined]; !ok {
		return nil
	}
	return a.nodes.annotate(ctx, nodemarks.AnnotationQuarantined, nil)
}
