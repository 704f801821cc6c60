package agent

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/notify"
)

// applyEffects carries out what a step makes known (decide.Effect), for
// the node's record r on its Node (uid); without a Node (its Node is gone)
// it takes no Event and no history, and r nil no notification. It is the maintenance loop's one
// door to Events, notifications and the history: nothing else in it sends
// them (TestEffectsHaveOneDoor).
func (a *Agent) applyEffects(ctx context.Context, uid types.UID, r *lock.Record, effects []decide.Effect) {
	var rec lock.Record
	if r != nil {
		rec = *r
	}
	for _, e := range effects {
		switch {
		case e.Event != "" && e.Pod != "":
			ns, name, _ := strings.Cut(e.Pod, "/")
			a.event(ctx, corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: name}, corev1.EventTypeWarning, e.Event, e.Message)
		case e.Event != "" && uid != "":
			typ, msg := corev1.EventTypeNormal, e.Message
			if e.Warning {
				typ = corev1.EventTypeWarning
			}
			if msg == "" {
				msg = rec.Message
			}
			a.event(ctx, nodeRef(a.node, uid), typ, e.Event, msg)
		case e.Notify != "" && r != nil:
			a.tell(notify.Event(e.Notify), rec, e.Message)
		case e.History != "" && uid != "":
			a.remember(ctx, rec, e.History)
		}
	}
}

// uidOf is the node's UID; "" when its Node is gone.
func uidOf(node *corev1.Node) types.UID {
	if node == nil {
		return ""
	}
	return node.UID
}
