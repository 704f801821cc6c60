package agent

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/simapi"
)

// scenario is a simulated world without faults or chance: the built-in
// policy (one node at a time), the named hosts with their agents started,
// and the tests say when the watches deliver.
func scenario(t *testing.T, names ...string) *world {
	t.Helper()
	w := &world{rng: rand.New(rand.NewPCG(1, 2)), api: simapi.New(), now: time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC)}
	w.clock = testingclock.NewFakeClock(w.now)
	w.api.KeepChanges = 1000
	w.cfg = config.Defaults()
	w.concurrency = 1
	w.nearBand = decide.NearBand
	for _, name := range names {
		h := &host{w: w, name: name, zone: "a", stay: true, dir: filepath.Join(t.TempDir(), name)}
		if err := os.MkdirAll(h.stateDir(), 0o755); err != nil {
			t.Fatal(err)
		}
		w.api.Put(simapi.Key{Resource: simapi.Nodes, Name: name}, simNode(name, h.zone))
		w.hosts = append(w.hosts, h)
		h.start()
		h.crashAt = 0 // no chance here
	}
	t.Cleanup(func() {
		for _, h := range w.hosts {
			h.stop("end of the test")
		}
		if t.Failed() {
			t.Logf("trace:\n%s", strings.Join(w.trace, "\n"))
		}
	})
	return w
}

// deliver hands every watch of h all it has pending.
func (h *host) deliver() {
	for _, sw := range h.watches {
		sw.deliver(h.w.api, -1)
	}
}

// lease reads a Lease that must exist (leaseOrNil for one that may not).
func (w *world) lease(t *testing.T, name string) *coordv1.Lease {
	t.Helper()
	l := w.leaseOrNil(t, name)
	if l == nil {
		t.Fatalf("reading %s: not found", name)
	}
	return l
}

// A waiting node whose view says the lock is free takes it, cordons its
// node and starts draining, in one reconcile after its record is out.
func TestReconcileTakesAFreeLock(t *testing.T) {
	w := scenario(t, "n1")
	h := w.hosts[0]
	w.request(h)
	for i := 0; i < 10 && h.agent.decision.State != lock.Draining; i++ {
		h.step()
		if h.lastErr != "" {
			t.Fatalf("step %d failed: %s", i, h.lastErr)
		}
		h.deliver()
	}
	if got := lock.Holder(w.lease(t, lock.DefaultGroup.LockName(0))); got != "n1" {
		t.Fatalf("the lock is held by %q, want n1", got)
	}
	o, err := w.api.Get(simapi.Key{Resource: simapi.Nodes, Name: "n1"})
	if err != nil || !o.(*corev1.Node).Spec.Unschedulable {
		t.Fatalf("n1 is not cordoned: %v", err)
	}
	if r := lock.RecordFromLease(w.lease(t, lock.RecordName("n1"))); r.State != lock.Draining {
		t.Fatalf("n1's record says %s, want Draining", r.State)
	}
}

// A node whose cache has not yet seen that another node took the lock
// tries it and loses the race (the API server refuses the write): that is
// no error, the node stays Waiting and cordons nothing, and once its watch
// shows the holder it says whom it waits for.
func TestReconcileLosesARaceWithoutError(t *testing.T) {
	w := scenario(t, "n1", "n2")
	h := w.hosts[0]
	// The lock exists, free (given back by an earlier holder), and n1
	// knows it.
	free := ""
	taken := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.DefaultGroup.LockName(0), Namespace: simNamespace,
		Labels: map[string]string{lock.LabelPolicy: lock.DefaultGroup.Policy, lock.LabelManagedBy: lock.ManagedBy}},
		Spec: coordv1.LeaseSpec{HolderIdentity: &free}}
	key := simapi.Key{Resource: simapi.Leases, Namespace: simNamespace, Name: taken.Name}
	w.api.Put(key, taken.DeepCopy())
	h.deliver()
	w.request(h)
	h.step() // its record: Waiting
	h.deliver()
	// n2 takes the lock meanwhile; n1's watch has not delivered it, so n1
	// tries the lock as it last saw it, and the API server refuses the
	// write (its resourceVersion is old).
	holder := "n2"
	now := metav1.NewMicroTime(w.now)
	taken.Spec.HolderIdentity, taken.Spec.AcquireTime, taken.Spec.RenewTime = &holder, &now, &now
	w.api.Put(key, taken)
	conflicts := w.api.Conflicts
	for i := 0; i < 5; i++ {
		h.step()
		if h.lastErr != "" {
			t.Fatalf("step %d: a lost race is an error: %s", i, h.lastErr)
		}
	}
	if got := lock.Holder(w.lease(t, taken.Name)); got != "n2" {
		t.Fatalf("the lock is held by %q, want n2 still", got)
	}
	if w.api.Conflicts == conflicts {
		t.Fatal("n1 never tried the lock: the race was not run")
	}
	o, err := w.api.Get(simapi.Key{Resource: simapi.Nodes, Name: "n1"})
	if err != nil || o.(*corev1.Node).Spec.Unschedulable {
		t.Fatalf("n1 was cordoned without the lock (%v)", err)
	}
	h.deliver()
	h.step()
	r := lock.RecordFromLease(w.lease(t, lock.RecordName("n1")))
	if r.State != lock.Waiting {
		t.Fatalf("n1's record says %s, want Waiting", r.State)
	}
	if d := h.agent.decision; d.State != lock.Waiting || len(d.Try) != 0 {
		t.Fatalf("n1 decided %s, trying %v, with the lock held by n2", d.State, d.Try)
	}
}
