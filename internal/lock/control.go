package lock

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ControlConfigMap is the ConfigMap whose "paused" key stops new grants
// cluster-wide (the holders finish).
const ControlConfigMap = "control"

// Paused reads the control ConfigMap: paused, and why. A missing ConfigMap
// is not paused.
func Paused(cm *corev1.ConfigMap) (bool, string) {
	if cm == nil || !strings.EqualFold(strings.TrimSpace(cm.Data["paused"]), "true") {
		return false, ""
	}
	return true, cm.Data["reason"]
}
