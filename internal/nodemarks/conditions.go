package nodemarks

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/lock"
)

// ConditionTypes are the Node conditions Kubernetes defines for what
// Kustodian does (KEP-5683; "the admin is responsible for setting and
// clearing" them), in the order they are set.
var ConditionTypes = []corev1.NodeConditionType{
	corev1.NodeMaintenancePlanned, corev1.NodeDrainInProgress, corev1.NodeDrained, corev1.NodeMaintenanceInProgress,
}

// conditionsTrue are the conditions true in each state: Waiting, a
// maintenance planned; Draining, planned and draining; drained and in
// maintenance (InMaintenance, Rebooting, Completing until the node is
// given back). Idle: none.
var conditionsTrue = map[lock.State][]corev1.NodeConditionType{
	lock.Waiting:       {corev1.NodeMaintenancePlanned},
	lock.Draining:      {corev1.NodeMaintenancePlanned, corev1.NodeDrainInProgress},
	lock.InMaintenance: {corev1.NodeDrained, corev1.NodeMaintenanceInProgress},
	lock.Rebooting:     {corev1.NodeDrained, corev1.NodeMaintenanceInProgress},
	lock.Completing:    {corev1.NodeDrained, corev1.NodeMaintenanceInProgress},
}

// Conditions are the four maintenance conditions of a Node whose agent is
// in state with message, given the conditions it has (its status's): each
// True or False with the state as its reason and message. Failed keeps
// what was true, with the failure as the message. Only a change of status
// moves a condition's lastTransitionTime; changed says whether anything
// differs from have, so that an unchanged Node is not written.
func Conditions(state lock.State, message string, have []corev1.NodeCondition, now time.Time) (out []corev1.NodeCondition, changed bool) {
	old := map[corev1.NodeConditionType]corev1.NodeCondition{}
	for _, c := range have {
		old[c.Type] = c
	}
	isTrue := map[corev1.NodeConditionType]bool{}
	reason := string(state)
	switch state {
	case lock.Failed:
		for _, t := range ConditionTypes {
			isTrue[t] = old[t].Status == corev1.ConditionTrue
		}
		reason = "MaintenanceFailed"
	case lock.Idle:
		reason, message = "NoMaintenance", "no maintenance requested"
	default:
		for _, t := range conditionsTrue[state] {
			isTrue[t] = true
		}
	}
	for _, t := range ConditionTypes {
		c := corev1.NodeCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason, Message: message,
			LastHeartbeatTime: metav1.NewTime(now), LastTransitionTime: metav1.NewTime(now)}
		if isTrue[t] {
			c.Status = corev1.ConditionTrue
		}
		if o, ok := old[t]; ok {
			if o.Status == c.Status {
				c.LastTransitionTime = o.LastTransitionTime
			}
			if o.Status == c.Status && o.Reason == c.Reason && o.Message == c.Message {
				c.LastHeartbeatTime = o.LastHeartbeatTime
			} else {
				changed = true
			}
		} else if state != lock.Idle || c.Status == corev1.ConditionTrue {
			changed = true
		}
		out = append(out, c)
	}
	return out, changed
}
