package nodemarks

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kustodian/kustodian/internal/lock"
)

func statuses(cs []corev1.NodeCondition) map[corev1.NodeConditionType]corev1.ConditionStatus {
	out := map[corev1.NodeConditionType]corev1.ConditionStatus{}
	for _, c := range cs {
		out[c.Type] = c.Status
	}
	return out
}

// Through a maintenance the four conditions say where the node is; a
// failure keeps what was true with its message; Idle makes them all
// False; a node that never had them gets none written while Idle.
func TestConditionsThroughAMaintenance(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC)
	T, F := corev1.ConditionTrue, corev1.ConditionFalse
	if _, changed := Conditions(lock.Idle, "", nil, t0); changed {
		t.Error("an Idle node without the conditions gets them written")
	}
	var have []corev1.NodeCondition
	for i, step := range []struct {
		state lock.State
		msg   string
		want  [4]corev1.ConditionStatus // planned, draining, drained, in maintenance
	}{
		{lock.Waiting, "waiting: position 2", [4]corev1.ConditionStatus{T, F, F, F}},
		{lock.Draining, "draining", [4]corev1.ConditionStatus{T, T, F, F}},
		{lock.Failed, "drain timed out: pod shop/db-0", [4]corev1.ConditionStatus{T, T, F, F}},
		{lock.Completing, "completing after a failed maintenance", [4]corev1.ConditionStatus{F, F, T, T}},
		{lock.Idle, "", [4]corev1.ConditionStatus{F, F, F, F}},
		{lock.Waiting, "waiting", [4]corev1.ConditionStatus{T, F, F, F}},
		{lock.InMaintenance, "in maintenance", [4]corev1.ConditionStatus{F, F, T, T}},
		{lock.Rebooting, "rebooting", [4]corev1.ConditionStatus{F, F, T, T}},
	} {
		now := t0.Add(time.Duration(i) * time.Minute)
		out, changed := Conditions(step.state, step.msg, have, now)
		if !changed {
			t.Errorf("%s: nothing changed", step.state)
		}
		got := statuses(out)
		for j, ct := range ConditionTypes {
			if got[ct] != step.want[j] {
				t.Errorf("%s: %s is %s, want %s", step.state, ct, got[ct], step.want[j])
			}
		}
		for _, c := range out {
			if step.state == lock.Failed && c.Message != step.msg {
				t.Errorf("Failed: %s says %q, want the failure", c.Type, c.Message)
			}
			if c.Status == statuses(have)[c.Type] && len(have) > 0 {
				for _, o := range have {
					if o.Type == c.Type && !o.LastTransitionTime.Equal(&c.LastTransitionTime) {
						t.Errorf("%s: %s kept its status but its transition time moved", step.state, c.Type)
					}
				}
			}
		}
		if _, again := Conditions(step.state, step.msg, out, now.Add(time.Second)); again {
			t.Errorf("%s: the same state again is a change", step.state)
		}
		have = out
	}
}
