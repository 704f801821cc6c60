package lockapi

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/kustodian/kustodian/internal/lock"
)

// SetPaused writes the control ConfigMap (paused, and why), creating it
// when missing.
func (c *Client) SetPaused(ctx context.Context, paused bool, reason string) error {
	data := map[string]string{"paused": fmt.Sprint(paused)}
	if reason != "" {
		data["reason"] = reason
	}
	cms := c.Kube.CoreV1().ConfigMaps(c.Namespace)
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm, err := cms.Get(ctx, lock.ControlConfigMap, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			cm = &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: lock.ControlConfigMap, Namespace: c.Namespace, Labels: map[string]string{lock.LabelManagedBy: lock.ManagedBy}},
				Data:       data,
			}
			_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		cm.Data = data
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
		return err
	})
}

// SetHold sets (hold) or clears an admin's hold on a node: the Node
// annotation lock.AnnotationHold, whose value is the reason ("true" when none).
func (c *Client) SetHold(ctx context.Context, node string, hold bool, reason string) error {
	var value any // nil removes it
	if hold {
		value = "true"
		if reason != "" {
			value = reason
		}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{lock.AnnotationHold: value}}})
	if err != nil {
		return err
	}
	_, err = c.Kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kustodian-ctl"})
	return err
}
