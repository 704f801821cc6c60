package agent

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kustodian/kustodian/internal/history"
	"github.com/kustodian/kustodian/internal/lock"
)

// nodeWriter is the agent's one door to its own Node: every write it makes
// there (its labels, its marks, its conditions, its history) goes through
// here, as patches (the agent may not update Nodes); the cordon goes
// through the drain (nodeDrainer). TestNodeWritesHaveOneDoor keeps it so.
type nodeWriter struct {
	kube kubernetes.Interface
	name string
}

func (w nodeWriter) patch(ctx context.Context, pt types.PatchType, body any, what string, subresources ...string) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	if _, err := w.kube.CoreV1().Nodes().Patch(ctx, w.name, pt, b, metav1.PatchOptions{FieldManager: Component}, subresources...); err != nil {
		return fmt.Errorf("%s of node %s: %w", what, w.name, err)
	}
	return nil
}

// fresh reads the Node from the API server, not a cache.
func (w nodeWriter) fresh(ctx context.Context) (*corev1.Node, error) {
	return w.kube.CoreV1().Nodes().Get(ctx, w.name, metav1.GetOptions{})
}

// label sets one label (value nil removes it).
func (w nodeWriter) label(ctx context.Context, key string, value *string) error {
	return w.patch(ctx, types.MergePatchType, map[string]any{"metadata": map[string]any{"labels": map[string]any{key: value}}}, "labelling "+key)
}

// annotate sets one annotation (value nil removes it).
func (w nodeWriter) annotate(ctx context.Context, key string, value *string) error {
	return w.patch(ctx, types.MergePatchType, map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}}}, "annotating "+key)
}

// stateLabel sets lock.LabelState to the node's state (n as last seen),
// or removes it for Idle.
func (w nodeWriter) stateLabel(ctx context.Context, n *corev1.Node, state lock.State) error {
	current, has := n.Labels[lock.LabelState]
	switch {
	case state == lock.Idle && !has:
		return nil
	case state == lock.Idle:
		return w.patch(ctx, types.StrategicMergePatchType, map[string]any{"metadata": map[string]any{"labels": map[string]any{lock.LabelState: nil}}}, "labelling "+lock.LabelState)
	case current == string(state):
		return nil
	}
	return w.patch(ctx, types.StrategicMergePatchType, map[string]any{"metadata": map[string]any{"labels": map[string]any{lock.LabelState: string(state)}}}, "labelling "+lock.LabelState)
}

// conditions sets the Node's maintenance conditions (its status).
func (w nodeWriter) conditions(ctx context.Context, want []corev1.NodeCondition) error {
	return w.patch(ctx, types.StrategicMergePatchType, map[string]any{"status": map[string]any{"conditions": want}}, "setting the maintenance conditions", "status")
}

// appendHistory appends e to the Node's history (history.Annotation), read
// fresh so that no entry is lost to a stale cache, with a patch made
// conditional on what was read by its resourceVersion.
func (w nodeWriter) appendHistory(ctx context.Context, e history.Entry) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh, err := w.fresh(ctx)
		if err != nil {
			return err
		}
		return w.patch(ctx, types.MergePatchType, map[string]any{"metadata": map[string]any{
			"resourceVersion": fresh.ResourceVersion,
			"annotations":     map[string]string{history.Annotation: history.Append(fresh.Annotations[history.Annotation], e)},
		}}, "recording the history")
	})
}
