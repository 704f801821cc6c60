package timeline

import (
	"context"
	"errors"
	"reflect"
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
	if err := tl.CheckExclusive(1); err == nil || !strings.Contains(err.Error(), "2 nodes of group default active at once") {
		t.Errorf("CheckExclusive(1) = %v, want two nodes of group default active at once", err)
	}
}

// A history the API server no longer has (410 Gone, as after a restart
// with a watch cache) is listed again: the state the list shows is
// recorded, the gap is noted, and the recording goes on.
func TestRecordListsAgainAfterAGap(t *testing.T) {
	gone := apierrors.NewResourceExpired("too old resource version: 10 (12)").ErrStatus
	c := fake.NewClientset()
	n := 0
	c.PrependWatchReactor("leases", func(k8stesting.Action) (bool, watch.Interface, error) {
		w := watch.NewFake()
		if n == 0 {
			go func() {
				w.Action(watch.Modified, recordLease("a", lock.Waiting, "10"))
				// Meanwhile a went on, and the server lost that history.
				if err := c.Tracker().Add(recordLease("a", lock.Draining, "20")); err != nil {
					panic(err)
				}
				w.Action(watch.Error, runtime.Object(&gone))
			}()
		}
		n++
		return true, w, nil
	})
	tl, err := Record(t.Context(), c, "ns", nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a's Draining from the list after the gap", func() bool { return tl.State("a") == lock.Draining })
	if err := tl.Err(); err != nil {
		t.Errorf("Err after a gap: %v", err)
	}
	if gaps := tl.Gaps(); len(gaps) != 1 || !strings.Contains(gaps[0], "after resource version 10") {
		t.Errorf("Gaps = %q, want one after resource version 10", gaps)
	}
}

// A history that cannot be continued (lost, and the list to start again
// refused) fails every check instead of passing truncated.
func TestRecordFailsWhenTheHistoryBreaks(t *testing.T) {
	gone := apierrors.NewResourceExpired("too old resource version: 10 (12)").ErrStatus
	c := watches(t,
		[]watch.Event{{Type: watch.Modified, Object: recordLease("a", lock.Waiting, "10")}, {Type: watch.Error, Object: runtime.Object(&gone)}},
	)
	lists := 0
	c.PrependReactor("list", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists++
		if lists > 1 {
			return true, nil, apierrors.NewForbidden(coordv1.Resource("leases"), "", errors.New("the recorder lost its rights"))
		}
		return false, nil, nil
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	tl, err := Record(ctx, c, "ns", nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the recording to break off", func() bool { return tl.Err() != nil })
	if err := tl.CheckExclusive(1); err == nil || !strings.Contains(err.Error(), "lost its rights") {
		t.Errorf("CheckExclusive on a broken history: %v", err)
	}
	if err := tl.AllIdle(nil); err == nil {
		t.Error("AllIdle passed on a broken history")
	}
}

// The request order is the order of the records' creation as the API
// server numbered it, whatever the agents wrote as their queue keys; a
// record listed at the start, whose creation was not seen, goes last.
func TestRequestOrderFollowsCreation(t *testing.T) {
	old := recordLease("old", lock.Waiting, "5")
	c := watches(t, []watch.Event{
		{Type: watch.Added, Object: withKey(recordLease("b", lock.Waiting, "30"), "1")},
		{Type: watch.Added, Object: withKey(recordLease("a", lock.Waiting, "40"), "2")},
		{Type: watch.Added, Object: withKey(recordLease("c", lock.Waiting, "100"), "0")},
	})
	if err := c.Tracker().Add(old); err != nil {
		t.Fatal(err)
	}
	tl, err := Record(t.Context(), c, "ns", nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "c's record", func() bool { return tl.State("c") == lock.Waiting })
	if got, want := tl.RequestOrder(), []string{"b", "a", "c", "old"}; !reflect.DeepEqual(got, want) {
		t.Errorf("RequestOrder = %v, want %v", got, want)
	}
}

func withKey(l *coordv1.Lease, key string) *coordv1.Lease {
	l.Annotations["kustodian.io/queue-key"] = key
	return l
}
