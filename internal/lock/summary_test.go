package lock

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func waiting(node, key string, prio int, heartbeat time.Time) Record {
	return Record{Node: node, State: Waiting, Policy: "default", QueueKey: key, Priority: prio, Heartbeat: heartbeat}
}

func TestSummarize(t *testing.T) {
	live, dead := t0, t0.Add(-time.Minute)
	blocked := waiting("blocked", "1", 0, live)
	blocked.Blocked = "outside its window"
	other := waiting("other-group", "2", 0, live)
	other.Policy = "p"
	records := []Record{
		waiting("c", "30", 0, live),
		waiting("a", "10", 0, live),
		waiting("urgent", "40", 5, live),
		waiting("dead", "5", 0, dead),
		waiting("me", "50", 0, dead), // the writer counts itself live
		blocked, other,
		{Node: "holder", State: InMaintenance, Policy: "default", QueueKey: "3", Heartbeat: live},
	}
	s := Summarize(records, DefaultGroup, "me", t0, 40*time.Second, "99")
	if got := strings.Join(s.Nodes, ","); got != "urgent,a,c,me" || s.Total != 4 || s.ListRV != "99" || s.Cut() {
		t.Fatalf("summary %+v", s)
	}
	if s.Last == nil || s.Last.Key != "50" {
		t.Errorf("last %+v, want me's place", s.Last)
	}
}

func TestSummaryIsCutToItsBound(t *testing.T) {
	var records []Record
	for i := range 2000 {
		records = append(records, waiting(fmt.Sprintf("%s-%d", strings.Repeat("n", 40), i), strconv.Itoa(1000+i), 0, t0))
	}
	s := Summarize(records, DefaultGroup, "", t0, time.Minute, "5000")
	b, _ := json.Marshal(s)
	if len(b) > MaxSummaryBytes || !s.Cut() || s.Total != 2000 || len(s.Nodes) < 100 {
		t.Fatalf("%d bytes, %d of %d nodes", len(b), len(s.Nodes), s.Total)
	}
	if s.Last.Key != records[len(s.Nodes)-1].QueueKey {
		t.Errorf("last %+v, want the place of the last named", s.Last)
	}
}

func TestPlaceBefore(t *testing.T) {
	for _, tc := range []struct {
		a, b Place
		want bool
	}{
		{Place{Key: "9"}, Place{Key: "10"}, true}, // as numbers, not strings
		{Place{Key: "10"}, Place{Key: "9"}, false},
		{Place{Priority: 1, Key: "10"}, Place{Key: "9"}, true},
		{Place{Key: "x"}, Place{Key: "9"}, false},
		{Place{Key: "9"}, Place{Key: "9"}, false},
	} {
		if got := tc.a.Before(tc.b); got != tc.want {
			t.Errorf("%+v before %+v: %v", tc.a, tc.b, got)
		}
	}
}

func TestSummaryFromLease(t *testing.T) {
	l := func(v string) *coordv1.Lease {
		return &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "queue-default", Annotations: map[string]string{AnnotationQueue: v, AnnotationQueueBy: "a"}}}
	}
	s, err := SummaryFromLease(l(`{"nodes":["a","b"],"total":5,"listRV":"12","last":{"key":"11"}}`))
	if err != nil || s.Index("b") != 1 || !s.Cut() || s.By != "a" {
		t.Fatalf("%+v %v", s, err)
	}
	for _, bad := range []string{``, `{`, `{"nodes":["a","b"],"total":1,"listRV":"12"}`, `{"nodes":[],"total":0,"listRV":"x"}`, `{"nodes":[],"total":-1,"listRV":"1"}`} {
		if _, err := SummaryFromLease(l(bad)); err == nil {
			t.Errorf("%q read", bad)
		}
	}
	if _, err := SummaryFromLease(&coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "queue-x"}}); err == nil {
		t.Error("a queue Lease without a summary read")
	}
}

func TestQueueName(t *testing.T) {
	if n := DefaultGroup.QueueName(); n != "queue-default" {
		t.Error(n)
	}
	if n := (GroupRef{Policy: "p", Group: "eu-1"}).QueueName(); n != "queue-p-eu-1" {
		t.Error(n)
	}
	if !IsQueueName("queue-p") || IsQueueName("queue-") || IsQueueName("lock-p-0") || IsLockName("queue-p") || IsRecordName("queue-p") {
		t.Error("queue names are their own kind")
	}
}
