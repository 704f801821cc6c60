package agent

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kustodian/kustodian/internal/rollout"
)

// sayAtRisk records an Event on this node's Node when its write (after)
// made the rollout's condition AtRisk true where it was not (before): the
// one node whose write made the change says it, once.
func (ro *rollouter) sayAtRisk(ctx context.Context, before, after *unstructured.Unstructured) {
	atRisk := func(u *unstructured.Unstructured) *metav1.Condition {
		r, err := rollout.FromUnstructured(u)
		if err != nil {
			return nil
		}
		c := meta.FindStatusCondition(r.Status.Conditions, rollout.ConditionAtRisk)
		if c == nil || c.Status != metav1.ConditionTrue {
			return nil
		}
		return c
	}
	c := atRisk(after)
	if c == nil || atRisk(before) != nil {
		return
	}
	obj, ok, err := ro.nodeStore.GetByKey(ro.node)
	m, isMeta := obj.(*metav1.PartialObjectMetadata)
	if err != nil || !ok || !isMeta {
		return
	}
	ro.log.Warn("a rollout's deadline is at risk", "rollout", after.GetName(), "reason", c.Reason, "message", c.Message)
	ro.event(ctx, m.UID, corev1.EventTypeWarning, ReasonRolloutAtRisk, fmt.Sprintf("rollout %s: %s", after.GetName(), c.Message))
}
