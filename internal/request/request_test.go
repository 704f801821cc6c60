package request

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestUntilIsDoneOrADuration(t *testing.T) {
	for s, want := range map[string]time.Duration{"": 0, "done": 0, "90m": 90 * time.Minute, "1h30m": 90 * time.Minute} {
		if got, err := ParseUntil(s); err != nil || got != want {
			t.Errorf("%q: %s %v", s, got, err)
		}
	}
	for _, s := range []string{"0s", "-5m", "tomorrow"} {
		if _, err := ParseUntil(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

func TestTheOldestActiveRequestIsTaken(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	obj := func(name, until, phase, started string, created time.Time) Request {
		u := &unstructured.Unstructured{Object: map[string]any{
			"metadata": map[string]any{"name": name, "uid": "uid-" + name, "creationTimestamp": created.Format(time.RFC3339),
				"annotations": map[string]any{AnnotationRequestedBy: "admin"}},
			"spec":   map[string]any{"nodeName": "n1", "reason": "r " + name, "until": until},
			"status": map[string]any{"phase": phase, "startedAt": started},
		}}
		r, err := FromUnstructured(u)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	done := obj("done", "done", Completed, "", t0)
	held := obj("held", "1h", InMaintenance, t0.Add(time.Minute).Format(time.RFC3339), t0.Add(time.Minute))
	later := obj("later", "done", "", "", t0.Add(2*time.Minute))
	if held.By != "admin" || held.For != time.Hour || !held.EndsAt().Equal(t0.Add(61*time.Minute)) || held.ID() != "request-uid-held" {
		t.Errorf("read %+v", held)
	}
	reqs := []Request{later, done, held}
	if p := Pick(reqs, t0.Add(10*time.Minute)); p == nil || p.Name != "held" {
		t.Errorf("picked %+v, want held (done is Completed)", p)
	}
	// Its hour is over: the next one.
	if p := Pick(reqs, t0.Add(61*time.Minute)); p == nil || p.Name != "later" {
		t.Errorf("picked %+v, want later", p)
	}
	if p := Pick([]Request{done}, t0); p != nil {
		t.Errorf("a Completed request picked: %+v", p)
	}
}
