package agent

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kustodian/kustodian/internal/metrics"
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

// observeDeadlines puts the deadlines of the rollouts this agent follows
// in its metrics: each one's predicted end and whether it is at risk.
func (ro *rollouter) observeDeadlines(rs []cachedRollout, nodes []rollout.NodeFacts) {
	if ro.deadlines == nil {
		return
	}
	out := map[string]metrics.Deadline{}
	for _, c := range rs {
		d := c.r.Spec.Deadline
		if d == nil {
			continue
		}
		p, err := rollout.PaceOf(c.r, nodes, ro.room(), ro.now())
		if err != nil {
			continue
		}
		out[c.r.Name] = metrics.Deadline{Deadline: d.Time.UTC(), PredictedEnd: p.PredictedEnd.UTC().Truncate(time.Minute),
			AtRisk: meta.IsStatusConditionTrue(c.r.Status.Conditions, rollout.ConditionAtRisk)}
	}
	ro.deadlines(out)
}

// deadlineMetrics keeps the rollouts' deadlines in the metrics when they
// changed.
func (a *Agent) deadlineMetrics(d map[string]metrics.Deadline) {
	if a.metrics.store == nil || maps.Equal(a.metrics.store.Data().Deadlines, d) || len(d) == 0 && len(a.metrics.store.Data().Deadlines) == 0 {
		return
	}
	a.updateMetrics(func(m *metrics.Data) { m.Deadlines = d })
}
