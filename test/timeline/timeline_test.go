package timeline

import (
	"context"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kustodian/kustodian/internal/lock"
)

func recordLease(node string, state lock.State, rv string) *coordv1.Lease {
	return &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.RecordName(node), Namespace: "ns", ResourceVersion: rv,
		Annotations: map[string]string{lock.AnnotationState: string(state)}}}
}

// watches serves each watch the recorder opens from the next script: the
// events to send, then whether to close the watch.
func watches(t *testing.T, scripts ...[]watch.Event) *fake.Clientset {
	t.Helper()
	c := fake.NewClientset()
	n := 0
	c.PrependWatchReactor("leases", func(k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFake()
		if n < len(scripts) {
			events := scripts[n]
			last := n == len(scripts)-1
			go func() {
				for _, ev := range events {
					w.Action(ev.Type, ev.Object)
				}
				if !last {
					w.Stop() // the API server closes the watch
				}
			}()
		}
		n++
		return true, w, nil
	})
	return c
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(t.Context(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// A watch the API server closes is opened again: what follows is recorded.
func TestRecordRewatchesAClosedWatch(t *testing.T) {
	c := watches(t,
		[]watch.Event{{Type: watch.Modified, Object: recordLease("a", lock.Waiting, "10")}},
		[]watch.Event{{Type: watch.Modified, Object: recordLease("a", lock.Draining, "11")}, {Type: watch.Modified, Object: recordLease("b", lock.Draining, "12")}},
	)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	tl, err := Record(ctx, c, "ns", nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b's Draining after the re-watch", func() bool { return tl.State("b") == lock.Draining })
	if err := tl.Err(); err != nil {
		t.Errorf("Err after a re-watch: %v", err)
	}
	if err := tl.CheckExclusive(1); err == nil || !strings.Contains(err.Error(), "2 nodes active at once") {
		t.Errorf("CheckExclusive(1) = %v, want two nodes active at once", err)
	}
}

// A history that cannot be continued (the resource version is gone) fails
// every check instead of passing truncated.
func TestRecordFailsWhenTheHistoryBreaks(t *testing.T) {
	gone := apierrors.NewResourceExpired("too old resource version: 10 (12)").ErrStatus
	c := watches(t,
		[]watch.Event{{Type: watch.Modified, Object: recordLease("a", lock.Waiting, "10")}},
		[]watch.Event{{Type: watch.Error, Object: runtime.Object(&gone)}},
	)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	tl, err := Record(ctx, c, "ns", nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the recording to break off", func() bool { return tl.Err() != nil })
	if err := tl.CheckExclusive(1); err == nil {
		t.Error("CheckExclusive passed on a broken history")
	}
	if err := tl.AllIdle(nil); err == nil {
		t.Error("AllIdle passed on a broken history")
	}
}
