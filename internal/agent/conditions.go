package agent

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/nodemarks"
)

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
