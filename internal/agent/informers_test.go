package agent

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kustodian/kustodian/internal/lock"
)

// A renewal of the queue Lease (a head that waits, a node claiming the
// turn) is a change seen, not a change of the summary: only a new summary
// moves Changed.
func TestSawQueueTellsARenewalFromANewSummary(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	a := &Agent{now: func() time.Time { return now }}
	a.queue.seen, a.queue.changed, a.queue.last = map[string]time.Time{}, map[string]time.Time{}, map[string]seenQueue{}
	rv := 10
	q := func(summary, by string) *coordv1.Lease {
		rv++
		return &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "queue-default", ResourceVersion: fmt.Sprint(rv),
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
	next := q(`{"nodes":["b"],"total":1,"listRV":"20"}`, "b")
	a.sawQueue(renewed, next)
	if !a.queue.changed["queue-default"].Equal(now) {
		t.Errorf("a new summary: changed %s; want %s", a.queue.changed["queue-default"], now)
	}
	// The same version again (an informer's relist, a watch started
	// again after a sleep far back, as an Add) is nothing new.
	saw := now
	now = now.Add(time.Minute)
	a.sawQueue(nil, next.DeepCopy())
	if !a.queue.seen["queue-default"].Equal(saw) || !a.queue.changed["queue-default"].Equal(saw) {
		t.Errorf("the same version again: seen %s, changed %s; want both %s", a.queue.seen["queue-default"], a.queue.changed["queue-default"], saw)
	}
	a.sawQueue(nil, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}})
	if _, ok := a.queue.seen["node-a"]; ok {
		t.Errorf("a record counted as a queue")
	}
}

// The agent's informers make their watches last 30 to 60 minutes, not
// client-go's 5 to 10: a real informer, against an HTTP server that
// records what each watch asks for.
func TestInformersWatchForHalfAnHourOrMore(t *testing.T) {
	asked := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("watch") != "true" {
			fmt.Fprint(w, `{"kind":"LeaseList","apiVersion":"coordination.k8s.io/v1","metadata":{"resourceVersion":"5"},"items":[]}`)
			return
		}
		select {
		case asked <- r.URL.Query().Get("timeoutSeconds"):
		default:
		}
		<-r.Context().Done()
	}))
	defer srv.Close()
	kube := kubernetes.NewForConfigOrDie(&rest.Config{Host: srv.URL})
	f := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace("kustodian"),
		tweaked(func(o *metav1.ListOptions) { o.LabelSelector = lock.LabelPolicy }))
	f.Coordination().V1().Leases().Informer()
	stop := make(chan struct{})
	defer f.Shutdown()
	defer close(stop)
	f.Start(stop)
	select {
	case got := <-asked:
		secs, err := strconv.Atoi(got)
		if err != nil || secs < 1800 || secs > 3600 {
			t.Fatalf("the watch asked for timeoutSeconds=%q; want 1800 to 3600", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the informer made no watch in 30 s")
	}
}
