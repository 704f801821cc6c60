package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kustodian/kustodian/internal/history"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/nodemarks"
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

// cordon puts the cordon on (again, if someone took it off).
func (a *Agent) cordon(ctx context.Context, node *corev1.Node) error {
	byAdmin, err := a.drain.seam.Cordon(ctx, node)
	if err == nil && byAdmin {
		a.log.Info("node was already cordoned by someone else; it stays cordoned after maintenance")
	}
	return err
}

// uncordon takes the cordon off (unless an admin had cordoned it) and the
// autoscaler's mark. The Node is read from the API server, not the
// informer's cache: a cache that has not yet seen this agent's own cordon
// (a watch behind, or in its backoff after an outage) would say there is
// nothing to uncordon, and the node would stay cordoned. One GET per
// maintenance.
func (a *Agent) uncordon(ctx context.Context, node *corev1.Node) error {
	fresh, err := a.nodes.fresh(ctx)
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return fmt.Errorf("reading node %s to uncordon it: %w", node.Name, err)
	}
	if err := a.drain.seam.Uncordon(ctx, fresh); err != nil && !apierrors.IsNotFound(errors.Unwrap(err)) {
		return err
	}
	if err := a.drain.seam.Unprotect(ctx, fresh); err != nil && !apierrors.IsNotFound(errors.Unwrap(err)) {
		return err
	}
	return nil
}

// showState writes the node's state label and its conditions.
func (a *Agent) showState(ctx context.Context, node *corev1.Node, state lock.State, message string) error {
	if err := a.nodes.stateLabel(ctx, node, state); err != nil {
		return err
	}
	return a.setConditions(ctx, node, state, message)
}

// unquarantine takes the quarantine mark off the node once it is back.
func (a *Agent) unquarantine(ctx context.Context, node *corev1.Node) error {
	if _, ok := node.Annotations[nodemarks.AnnotationQuarantined]; !ok {
		return nil
	}
	return a.nodes.annotate(ctx, nodemarks.AnnotationQuarantined, nil)
}

// conditionMessages are the Node conditions' messages by state: fixed, so
// that the Node's status is written when the state changes, not at every
// change of the record's message (a waiting node's place). Failed says the
// failure.
var conditionMessages = map[lock.State]string{
	lock.Idle:          "no maintenance requested",
	lock.Waiting:       "maintenance requested; the node waits for its turn (kustodian-ctl status NODE says why)",
	lock.Draining:      "cordoned by Kustodian; its pods are being evicted",
	lock.InMaintenance: "drained; the maintenance runs",
	lock.Rebooting:     "drained; the host reboots for its maintenance",
	lock.Completing:    "the maintenance is over; the node is being given back",
}

// setConditions keeps the Node's maintenance conditions (MaintenancePlanned,
// DrainInProgress, Drained, MaintenanceInProgress) as the state says,
// patching only them in its status. An installation older than the agent
// (no right to nodes/status) is said once and does not hold the
// maintenance back.
func (a *Agent) setConditions(ctx context.Context, node *corev1.Node, state lock.State, failure string) error {
	if node == nil {
		return nil
	}
	msg := conditionMessages[state]
	if state == lock.Failed {
		msg = failure
	}
	want, changed := nodemarks.Conditions(state, msg, node.Status.Conditions, a.now())
	key := string(state) + "\x00" + msg
	if !changed {
		a.reported.conditions = ""
		return nil
	}
	if a.reported.conditions == key {
		return nil // written; the cache has not caught up yet
	}
	err := a.nodes.conditions(ctx, want)
	switch {
	case apierrors.IsForbidden(err):
		if !a.reported.conditionsRefused {
			a.log.Warn("may not set the Node's maintenance conditions: the installation is older than this agent (kustodian-ctl install adds the right)", "err", err)
			a.reported.conditionsRefused = true
		}
		return nil
	case err != nil:
		return err
	}
	a.reported.conditions = key
	return nil
}
