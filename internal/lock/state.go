package lock

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// SetStateLabel sets LabelState on the node to its state, or removes it
// for Idle: the states are this package's, and so is their label.
func (c *Client) SetStateLabel(ctx context.Context, n *corev1.Node, state State) error {
	if state == Idle {
		state = ""
	}
	if n.Labels[LabelState] == string(state) {
		return nil
	}
	var value any = string(state)
	if state == "" {
		if _, ok := n.Labels[LabelState]; !ok {
			return nil
		}
		value = nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{LabelState: value}}})
	if err != nil {
		return err
	}
	if _, err := c.Kube.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: "kustodian"}); err != nil {
		return fmt.Errorf("labelling node %s: %w", n.Name, err)
	}
	return nil
}
