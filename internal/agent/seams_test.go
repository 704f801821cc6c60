package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/jobs"
	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/lock/lockapi"
	"github.com/kustodian/kustodian/test/simapi"
)

// failingLocks is the real lock store with a fault put in: its next
// acquireFailures Acquire calls fail before reaching the API server.
type failingLocks struct {
	lockStore
	acquireFailures int
	acquires        int
}

func (f *failingLocks) Acquire(ctx context.Context, name string, group lock.GroupRef, node string, current *coordv1.Lease, p lock.Params, facts lockapi.FactsFunc) (*coordv1.Lease, lock.Verdict, error) {
	f.acquires++
	if f.acquireFailures > 0 {
		f.acquireFailures--
		return nil, lock.Verdict{}, apierrors.NewServiceUnavailable("etcdserver: leader changed")
	}
	return f.lockStore.Acquire(ctx, name, group, node, current, p, facts)
}

func (w *world) cordoned(t *testing.T, name string) bool {
	t.Helper()
	o, err := w.api.Get(simapi.Key{Resource: simapi.Nodes, Name: name})
	if err != nil {
		t.Fatalf("reading node %s: %v", name, err)
	}
	return o.(*corev1.Node).Spec.Unschedulable
}

// A lock write that fails is an error of the step, which is retried: the
// node cordons nothing meanwhile, and takes the lock once the write goes
// through.
func TestReconcileRetriesAFailedLockWrite(t *testing.T) {
	w := scenario(t, "n1")
	h := w.hosts[0]
	locks := &failingLocks{lockStore: h.agent.locks.store, acquireFailures: 2}
	h.agent.locks.store = locks
	w.request(h)
	failed := 0
	for i := 0; i < 12 && h.agent.decision.State != lock.Draining; i++ {
		h.step()
		if h.lastErr != "" {
			failed++
			if !strings.Contains(h.lastErr, "leader changed") {
				t.Fatalf("step %d failed with %q, not the lock write's error", i, h.lastErr)
			}
			if w.cordoned(t, "n1") {
				t.Fatalf("step %d: n1 is cordoned though its lock write failed", i)
			}
		}
		h.deliver()
	}
	if failed != 2 || locks.acquires != 3 {
		t.Fatalf("%d steps failed and the lock was tried %d times, want 2 and 3", failed, locks.acquires)
	}
	if got := lock.Holder(w.lease(t, lock.DefaultGroup.LockName(0))); got != "n1" {
		t.Fatalf("the lock is held by %q, want n1", got)
	}
	if !w.cordoned(t, "n1") {
		t.Fatal("n1 holds the lock but is not cordoned")
	}
}

// fakeKured is Kured's lock as another node's Kured leaves it: full until
// free is set. A holder it takes shows in the agent's cache of Kured's
// DaemonSet, as its watch would show it.
type fakeKured struct {
	store     cache.Store
	free      bool
	acquired  []string
	attempted int
}

func (k *fakeKured) Acquire(_ context.Context, id string) (bool, string, error) {
	k.attempted++
	if !k.free {
		return false, "Kured's lock is held by n9", nil
	}
	k.acquired = append(k.acquired, id)
	value, err := json.Marshal(kured.Holder{NodeID: id})
	if err != nil {
		return false, "", err
	}
	held := map[string]string{}
	for _, key := range kured.LockAnnotations {
		held[key] = string(value)
	}
	return true, "", k.store.Update(&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: kured.Namespace, Name: kured.DaemonSet,
		Annotations: held}})
}

func (k *fakeKured) Release(context.Context, string) error { return errors.New("not held here") }

// Kured takes its lock between this node's look at it and its own lock:
// the node gives its lock back at once, cordons nothing, and goes on
// once Kured's lock is free.
func TestKuredTakingItsLockMeanwhileSendsTheLockBack(t *testing.T) {
	w := scenario(t, "n1")
	h := w.hosts[0]
	k := &fakeKured{store: cache.NewStore(cache.MetaNamespaceKeyFunc)}
	h.agent.kured.locker, h.agent.kured.ds, h.agent.caches.kured = k, cache.NewObjectName(kured.Namespace, kured.DaemonSet), k.store
	// Free as the agent last saw it.
	_ = k.store.Add(&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: kured.Namespace, Name: kured.DaemonSet}})
	w.request(h)
	for i := 0; i < 8 && k.attempted < 2; i++ {
		h.step()
		if h.lastErr != "" {
			t.Fatalf("step %d failed: %s", i, h.lastErr)
		}
		if w.cordoned(t, "n1") {
			t.Fatalf("step %d: n1 is cordoned while Kured holds its lock", i)
		}
		h.deliver()
	}
	if k.attempted < 2 {
		t.Fatalf("Kured's lock was tried %d times, want a retry", k.attempted)
	}
	if got := lock.Holder(w.lease(t, lock.DefaultGroup.LockName(0))); got != "" {
		t.Fatalf("the lock is held by %q while Kured's is taken, want it given back", got)
	}
	k.free = true
	for i := 0; i < 8 && h.agent.decision.State != lock.Draining; i++ {
		h.step()
		h.deliver()
	}
	if h.agent.decision.State != lock.Draining || !w.cordoned(t, "n1") {
		t.Fatalf("n1 is %s (cordoned %v) after Kured's lock was freed, want Draining", h.agent.decision.State, w.cordoned(t, "n1"))
	}
	if len(k.acquired) != 1 || k.acquired[0] != kured.HolderID("n1") {
		t.Fatalf("Kured's lock was taken as %v, want once as %s", k.acquired, kured.HolderID("n1"))
	}
}

// fakeRebooter refuses its first refusals requests, as logind does when
// an inhibitor blocks the reboot or it restarts.
type fakeRebooter struct {
	refusals, asked int
}

func (r *fakeRebooter) Reboot(context.Context) error {
	r.asked++
	if r.refusals > 0 {
		r.refusals--
		return errors.New("Operation inhibited")
	}
	return nil
}

type noRunner struct{}

func (noRunner) Start(context.Context, *jobs.Job) error {
	return errors.New("not started in this test")
}
func (noRunner) Alive(context.Context, *jobs.Job) (bool, error) { return false, nil }

// A reboot that logind refuses is asked for again at the next step, not
// waited for forever; once taken, it is not asked twice.
func TestARefusedRebootIsAskedAgain(t *testing.T) {
	ctx := context.Background()
	cfg := config.Defaults()
	cfg.StateDir = t.TempDir()
	if err := os.MkdirAll(jobs.DirIn(cfg.StateDir), 0o700); err != nil {
		t.Fatal(err)
	}
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC))
	a := New(Options{Config: cfg, NodeName: "n1", Kube: fake.NewClientset(), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Notifier: noNotify{}, Clock: clk})
	r := &fakeRebooter{refusals: 1}
	a.host.reboot, a.jobs.runner = r, noRunner{}
	code := 0
	if err := a.jobs.store.Save(&jobs.Job{ID: "patch", Command: []string{"true"}, Reboot: jobs.RebootAuto, State: jobs.Succeeded, Runs: 1, ExitCode: &code}); err != nil {
		t.Fatal(err)
	}
	step := func() (string, error) {
		j, err := a.jobs.store.Get("patch")
		if err != nil {
			t.Fatal(err)
		}
		l, err := a.jobFacts(ctx, j, true)
		if err != nil {
			t.Fatal(err)
		}
		next, err := jobs.Next(*l.Job, l.Facts)
		if err != nil {
			t.Fatal(err)
		}
		msg, failed, err := a.actOnJob(ctx, next, l.Facts)
		if failed {
			t.Fatalf("the job failed: %s", msg)
		}
		return msg, err
	}
	if _, err := step(); err == nil || !strings.Contains(err.Error(), "Operation inhibited") {
		t.Fatalf("a refused reboot was no error of the step: %v", err)
	}
	if j, _ := a.jobs.store.Get("patch"); j.State != jobs.Rebooting {
		t.Fatalf("the job is %s after its reboot was asked for, want rebooting", j.State)
	}
	for i := 0; i < 3; i++ {
		msg, err := step()
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if !strings.Contains(msg, "rebooting") {
			t.Fatalf("step %d says %q", i, msg)
		}
	}
	if r.asked != 2 {
		t.Fatalf("the reboot was asked for %d times, want 2 (refused, then taken)", r.asked)
	}
}
