// Package cordons is a test's independent judge of disruption: it follows
// the Nodes (test/follow) and keeps the most of the given nodes it saw
// cordoned at once, from the API server's evidence (each Node's
// spec.unschedulable), whoever cordoned them: Kustodian's agents, Kured, an
// admin. It shares no code with what it judges.
package cordons

import (
	"context"
	"sort"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/follow"
)

// Recorder keeps what it saw of the nodes' cordons.
type Recorder struct {
	mu       sync.Mutex
	cordoned map[string]bool
	most     []string
	failed   error
}

// Record starts following the Nodes until the test ends.
func Record(t testing.TB, e *cluster.Env, nodes []string) *Recorder {
	t.Helper()
	ours := map[string]bool{}
	for _, n := range nodes {
		ours[n] = true
	}
	r := &Recorder{cordoned: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	nodesAPI := e.Client.CoreV1().Nodes()
	err := follow.Start(ctx, follow.Source{What: "the Nodes",
		List:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return nodesAPI.List(ctx, o) },
		Watch: nodesAPI.Watch,
	}, follow.Handlers{
		Observe: func(ev follow.Event) {
			n, ok := ev.Object.(*corev1.Node)
			if !ok || !ours[n.Name] {
				return
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			r.cordoned[n.Name] = ev.Type != watch.Deleted && n.Spec.Unschedulable
			var now []string
			for name, c := range r.cordoned {
				if c {
					now = append(now, name)
				}
			}
			if len(now) > len(r.most) {
				sort.Strings(now)
				r.most = now
			}
		},
		Gap:  func(from, to string) {},
		Fail: func(err error) { r.mu.Lock(); r.failed = err; r.mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Most is the largest set of the nodes seen cordoned at once.
func (r *Recorder) Most() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.most...)
}

// Check fails the test when more than limit nodes were cordoned at once, or
// the recorder lost its history.
func (r *Recorder) Check(t testing.TB, limit int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed != nil {
		t.Fatalf("the cordon recorder failed: %v", r.failed)
	}
	if len(r.most) > limit {
		t.Errorf("%d nodes cordoned at once (%v), at most %d allowed", len(r.most), r.most, limit)
	}
}
