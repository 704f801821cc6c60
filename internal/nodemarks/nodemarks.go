// Package nodemarks puts Kustodian's marks on Node objects and takes them
// off: its cordon (with the annotation that says it is Kustodian's), and
// the cluster autoscaler's scale-down protection. The agent's drain and
// the admin's CLI share it; it needs nothing but client-go's clientset.
package nodemarks

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kustodian/kustodian/internal/lock"
)

// The marks Kustodian puts on the Node object (docs/design.md, "Cluster objects").

// Marks writes the marks with Client.
type Marks struct {
	Client kubernetes.Interface
}

const (
	AnnotationCordoned = lock.AnnotationCordoned
	// AnnotationQuarantined marks a node whose drain timed out and that its
	// policy quarantined (spec.drain.quarantine): the policy's name. It
	// goes when the node is back to Idle.
	AnnotationQuarantined = "kustodian.io/quarantined"
	// LabelKubeletEvictions says whether the agent found, when it last
	// started, that the kubelet's kubeconfig works as this node's kubelet
	// ("ready") or not ("unready"): whether kustodian-ctl install
	// --kubelet-evictions, which takes the eviction right away from the
	// agents, leaves this node able to drain. The node says it of itself.
	LabelKubeletEvictions = "kustodian.io/kubelet-evictions"
	// AnnotationAgentVersion is the version of the agent that last started
	// on the node (kustodian-ctl version lists them). The node says it of
	// itself, in at most MaxAgentVersionLength of the characters
	// AgentVersionChars (the admission policy holds it to them).
	AnnotationAgentVersion = "kustodian.io/agent-version"
	MaxAgentVersionLength  = 64
	AgentVersionChars      = "0-9A-Za-z.+~_-"
)

// Cordon makes the node unschedulable and marks that Kustodian did it, in one
// patch, so that a crash can never leave a cordon whose author is unknown. A
// node that is already unschedulable without the mark was cordoned by an
// admin: it is left as it is (and stays cordoned after maintenance).
// It returns whether an admin's cordon was found.
func (d Marks) Cordon(ctx context.Context, n *corev1.Node) (byAdmin bool, err error) {
	if n.Spec.Unschedulable {
		return !lock.CordonMarked(n.Annotations), nil
	}
	patch := map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{AnnotationCordoned: "true"}},
		"spec":     map[string]any{"unschedulable": true},
	}
	return false, d.patch(ctx, n.Name, patch, "cordoning")
}

// Uncordon undoes Kustodian's cordon. An admin's cordon is left in place;
// a mark with another value than Kustodian writes goes, and the cordon it
// stands beside stays.
func (d Marks) Uncordon(ctx context.Context, n *corev1.Node) error {
	if _, marked := n.Annotations[AnnotationCordoned]; !marked {
		return nil
	}
	patch := map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{AnnotationCordoned: nil}},
	}
	if lock.CordonMarked(n.Annotations) {
		patch["spec"] = map[string]any{"unschedulable": false}
	}
	return d.patch(ctx, n.Name, patch, "uncordoning")
}

// UncordonByAdmin makes node schedulable again for an admin, whoever
// cordoned it, and removes Kustodian's marks (its cordon, its state
// label).
func UncordonByAdmin(ctx context.Context, client kubernetes.Interface, node string) error {
	patch := map[string]any{
		"metadata": map[string]any{"annotations": map[string]any{AnnotationCordoned: nil}, "labels": map[string]any{lock.LabelState: nil}},
		"spec":     map[string]any{"unschedulable": false},
	}
	return Marks{Client: client}.patch(ctx, node, patch, "uncordoning")
}

func (d Marks) patch(ctx context.Context, node string, patch map[string]any, doing string) error {
	body, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	if _, err := d.Client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, body, metav1.PatchOptions{FieldManager: "kustodian"}); err != nil {
		return fmt.Errorf("%s node %s: %w", doing, node, err)
	}
	return nil
}

// The cluster autoscaler leaves a node alone while it carries this
// annotation; AnnotationProtected says Kustodian set it, so Kustodian
// removes it afterwards and never removes an admin's.
const (
	AnnotationScaleDownDisabled = "cluster-autoscaler.kubernetes.io/scale-down-disabled"
	AnnotationProtected         = "kustodian.io/autoscaler-protected"
)

// Protect keeps the cluster autoscaler off the node (policy
// autoscaler.protect) until Unprotect.
func (d Marks) Protect(ctx context.Context, n *corev1.Node) error {
	if _, set := n.Annotations[AnnotationScaleDownDisabled]; set {
		return nil // ours already, or an admin's
	}
	return d.patch(ctx, n.Name, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		AnnotationScaleDownDisabled: "true", AnnotationProtected: "true",
	}}}, "protecting from the autoscaler")
}

// Unprotect removes what Protect set.
func (d Marks) Unprotect(ctx context.Context, n *corev1.Node) error {
	if _, ours := n.Annotations[AnnotationProtected]; !ours {
		return nil
	}
	return d.patch(ctx, n.Name, map[string]any{"metadata": map[string]any{"annotations": map[string]any{
		AnnotationScaleDownDisabled: nil, AnnotationProtected: nil,
	}}}, "ending the autoscaler protection of")
}
