package agent

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/history"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/notify"
)

// applyEffects carries out what a step makes known (decide.Effect), for
// the node's record r on its Node (uid); without a Node (its Node is gone)
// it takes no Event and no history, and r nil no notification. It is the
// maintenance loop's one door to Events, notifications and the history:
// nothing else in it sends them (TestEffectsHaveOneDoor).
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

// Component is the Events' reporting component.
const Component = "kustodian"

// event records an Event about obj: a Node's in the namespace "default"
// (the API server accepts Events about a cluster-scoped object such as a
// Node only there, where the kubelet writes its own; `kubectl describe
// node` shows them), a pod's in its namespace. It is written
// synchronously, so an Event sent before a reboot is not lost in a buffer.
// Failing to write one is logged, not fatal.
func (a *Agent) event(ctx context.Context, obj corev1.ObjectReference, eventType, reason, message string) {
	now := metav1.NewTime(a.now())
	ns := obj.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", obj.Name, a.now().UnixNano()), Namespace: ns},
		InvolvedObject: obj,
		Reason:         reason,
		Message:        message,
		Type:           eventType,
		Source:         corev1.EventSource{Component: Component, Host: a.node},
		FirstTimestamp: now,
		LastTimestamp:  now,
		Count:          1,
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := a.kube.CoreV1().Events(ns).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		a.log.Warn("could not record event", "reason", reason, "object", obj.Kind+" "+obj.Namespace+"/"+obj.Name, "err", err)
	}
}

// nodeEvent records an Event on this node's Node (uid): the door the
// reconcilers beside the maintenance loop (rollouts, silences) say what
// they did by.
func (a *Agent) nodeEvent(ctx context.Context, uid types.UID, eventType, reason, message string) {
	a.event(ctx, nodeRef(a.node, uid), eventType, reason, message)
}

// nodeRef is the reference of an Event about a Node.
func nodeRef(name string, uid types.UID) corev1.ObjectReference {
	return corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: name, UID: uid}
}

// tell sends the notification of an event the node lived, about record r
// (its message replaced by message when that is not ""). It never waits.
func (a *Agent) tell(ev notify.Event, r lock.Record, message string) {
	if message == "" {
		message = r.Message
	}
	now := a.now()
	d := notify.Data{Event: ev, Node: a.node, Reason: r.Reason, Message: message, Group: r.Group, Policy: r.Policy,
		Time: now, Requested: r.Requested}
	if !r.Requested.IsZero() {
		d.Duration = now.Sub(r.Requested).Round(time.Second)
	}
	a.notifications.Notify(d)
}

// remember adds the maintenance that ended to the history on the node's
// Node (history.Annotation), read fresh so that no entry is lost to a
// stale cache. Its times come from the metrics kept in the state
// directory, which outlive agent restarts. A failure is logged: the
// history is a convenience, and the maintenance goes on.
func (a *Agent) remember(ctx context.Context, r lock.Record, result string) {
	e := history.Entry{Requested: r.Requested, Ended: a.now(), Result: result, Reason: r.Reason, Policy: r.Policy, Group: r.Group}
	if result == history.Failed {
		e.Message = r.Message
	}
	a.drain.mu.Lock()
	e.Escalated = a.drain.escalated
	a.drain.mu.Unlock()
	e.Packages = a.patchedPackages()
	if a.metrics.store != nil {
		d := a.metrics.store.Data()
		e.Started, e.Drained = d.DrainStarted, d.Drained
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := a.nodes.appendHistory(ctx, e); err != nil {
		a.log.Warn("the maintenance is not in the node's history", "annotation", history.Annotation, "err", err)
	}
}
