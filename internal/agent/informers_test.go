package agent

import (
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/lock"
)

// A renewal of the queue Lease (a head that waits, a node claiming the
// turn) is a change seen, not a change of the summary: only a new summary
// moves Changed.
func TestSawQueueTellsARenewalFromANewSummary(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	a := &Agent{now: func() time.Time { return now }}
	a.queue.seen, a.queue.changed = map[string]time.Time{}, map[string]time.Time{}
	q := func(summary, by string) *coordv1.Lease {
		return &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "queue-default",
			Annotations: map[string]string{lock.AnnotationQueue: summary, lock.AnnotationQueueBy: by}}}
	}
	first := q(`{"nodes":["a","b"],"total":2,"listRV":"10"}`, "x")
	a.sawQueue(nil, first)
	if !a.queue.seen["queue-default"].Equal(now) || !a.queue.changed["queue-default"].Equal(now) {
		t.Fatalf("first sight: seen %s, changed %s; want both %s", a.queue.seen["queue-default"], a.queue.changed["queue-default"], now)
	}
	made := now
	now = now.Add(45 * time.Second)
	renewed := q(`{"nodes":["a","b"],"total":2,"listRV":"10"}`, "b")
	a.sawQueue(first, renewed)
	if !a.queue.seen["queue-default"].Equal(now) || !a.queue.changed["queue-default"].Equal(made) {
		t.Errorf("a renewal: seen %s, changed %s; want seen %s, changed %s", a.queue.seen["queue-default"], a.queue.changed["queue-default"], now, made)
	}
	now = now.Add(time.Second)
	a.sawQueue(renewed, q(`{"nodes":["b"],"total":1,"listRV":"20"}`, "b"))
	if !a.queue.changed["queue-default"].Equal(now) {
		t.Errorf("a new summary: changed %s; want %s", a.queue.changed["queue-default"], now)
	}
	a.sawQueue(nil, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}})
	if _, ok := a.queue.seen["node-a"]; ok {
		t.Errorf("a record counted as a queue")
	}
}
