package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/kustodian/kustodian/internal/jobs"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/rollout"
)

// readWorld is one agent's rollouter, n1's, in a cluster of three nodes
// with one rollout to all of them: the rollout as the API server has it
// (a fake dynamic client that counts its GETs) and as the agent's watch
// of the rollouts' metadata has delivered it.
type readWorld struct {
	t     *testing.T
	ro    *rollouter
	dyn   *dynfake.FakeDynamicClient
	meta  cache.Store
	nodes []rollout.NodeFacts
	now   time.Time
	gets  int
	rv    int
	u     *unstructured.Unstructured
}

func newReadWorld(t *testing.T) *readWorld {
	t.Helper()
	w := &readWorld{t: t, now: time.Date(2026, 11, 29, 3, 0, 0, 0, time.UTC), rv: 10}
	r := &rollout.MaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "kustodian", Name: "fix", UID: types.UID("uid-1"), Generation: 1},
		Spec: rollout.Spec{Script: rollout.Source{Inline: "true\n", SHA256: rollout.SHA256([]byte("true\n"))},
			Stages: []rollout.Stage{{All: true}}}}
	r.Status.Nodes = []rollout.NodeStatus{}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
	if err != nil {
		t.Fatal(err)
	}
	w.u = &unstructured.Unstructured{Object: obj}
	w.u.SetAPIVersion(rollout.GVR.GroupVersion().String())
	w.u.SetKind(rollout.Kind)
	w.u.SetResourceVersion("10")
	w.dyn = dynfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{rollout.GVR: rollout.Kind + "List"})
	w.dyn.PrependReactor("get", rollout.GVR.Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		w.gets++
		return true, w.u.DeepCopy(), nil
	})
	for _, n := range []string{"n1", "n2", "n3"} {
		w.nodes = append(w.nodes, rollout.NodeFacts{Name: n, Labels: map[string]string{rollout.LabelRollouts: "enabled"}})
	}
	state := t.TempDir()
	if err := os.MkdirAll(jobs.DirIn(state), 0o700); err != nil {
		t.Fatal(err)
	}
	w.meta = cache.NewStore(cache.MetaNamespaceKeyFunc)
	w.ro = &rollouter{node: "n1", log: slog.New(slog.NewTextHandler(io.Discard, nil)), now: func() time.Time { return w.now },
		dyn: w.dyn, jobs: jobs.StoreIn(state), store: w.meta,
		copies: map[string]*rolloutCopy{}, reread: map[string]bool{}, refusedAt: map[string]time.Time{}}
	w.delivered()
	return w
}

// write is a write of the rollout by another writer: the entry e (added
// or replaced), or the spec's next generation (e nil).
func (w *readWorld) write(e *rollout.NodeStatus) {
	w.t.Helper()
	r, err := rollout.FromUnstructured(w.u)
	if err != nil {
		w.t.Fatal(err)
	}
	if e == nil {
		r.Generation++
		r.Spec.Script = rollout.Source{Inline: "false\n", SHA256: rollout.SHA256([]byte("false\n"))}
	} else {
		st, err := rollout.WithEntry(r, *e, w.nodes, w.now)
		if err != nil {
			w.t.Fatal(err)
		}
		r.Status = st
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
	if err != nil {
		w.t.Fatal(err)
	}
	w.rv++
	w.u = &unstructured.Unstructured{Object: obj}
	w.u.SetResourceVersion(strconv.Itoa(w.rv))
}

// delivered is the watch delivering the rollout's metadata as it is now.
func (w *readWorld) delivered() {
	m := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: w.u.GetNamespace(), Name: w.u.GetName(),
		UID: w.u.GetUID(), Generation: w.u.GetGeneration(), ResourceVersion: w.u.GetResourceVersion()}}
	if err := w.meta.Update(m); err != nil {
		w.t.Fatal(err)
	}
}

// step is the rollouter's list at state; it says how many GETs it made.
func (w *readWorld) step(state lock.State) int {
	w.t.Helper()
	before := w.gets
	w.ro.wakeAt = time.Time{}
	rs, err := w.ro.list(context.Background(), state, w.nodes)
	if err != nil {
		w.t.Fatal(err)
	}
	if len(rs) != 1 {
		w.t.Fatalf("listed %d rollouts, want 1", len(rs))
	}
	return w.gets - before
}

// What an agent reads of a rollout every node writes at once: the whole
// object when it is new and when its spec changes; paced while its node may
// still take it; nothing while its node is done with the revision, however
// many entries the others write; and once, at once, when its node holds
// its lock for a job of it that has not started.
func TestAnAgentReadsARolloutOnlyWhenItMayChangeWhatItDoes(t *testing.T) {
	w := newReadWorld(t)
	if n := w.step(lock.Idle); n != 1 {
		t.Fatalf("a new rollout: %d GETs, want 1", n)
	}
	rev := rollout.Revision("kustodian", "fix", w.ro.copies["fix"].r.Spec)
	pace := rolloutPace(len(w.nodes))

	// n1 may still take it: another's entry is read, but not before the
	// pace since the last read has passed: the watch does not wake the
	// agent before, a timer does.
	w.write(&rollout.NodeStatus{Name: "n2", Revision: rev, State: rollout.Refused, Message: "untrusted"})
	w.delivered()
	changed := func() bool { return w.ro.rolloutChanged(w.meta.List()[0], w.meta.List()[0]) }
	if changed() {
		t.Fatal("the watch wakes the agent within the pace")
	}
	if n := w.step(lock.Idle); n != 0 {
		t.Fatalf("a change within the pace: %d GETs, want 0", n)
	}
	if want := w.now.Add(pace); !w.ro.wakeAt.Equal(want) {
		t.Fatalf("the next step at %v, want %v (the next read's time)", w.ro.wakeAt, want)
	}
	w.now = w.now.Add(pace)
	if !changed() {
		t.Fatal("after the pace, the watch does not wake an agent that may still take the rollout")
	}
	if n := w.step(lock.Idle); n != 1 {
		t.Fatalf("a change after the pace: %d GETs, want 1", n)
	}

	// n1 refuses it (its own write comes back whole): from now on the
	// others' entries are not read, and do not wake it.
	finished := metav1.NewTime(w.now)
	w.write(&rollout.NodeStatus{Name: "n1", Revision: rev, State: rollout.Refused, Message: "untrusted", Finished: &finished, ObservedGeneration: 1})
	w.ro.keep(w.u.DeepCopy())
	w.ro.refusedAt["fix"] = w.now
	w.delivered() // its echo
	if n := w.step(lock.Idle); n != 0 {
		t.Fatalf("the echo of this node's own write: %d GETs, want 0", n)
	}
	for _, n := range []string{"n2", "n3", "n2", "n3"} {
		w.now = w.now.Add(pace)
		w.write(&rollout.NodeStatus{Name: n, Revision: rev, State: rollout.Refused, Message: "untrusted " + n})
		w.delivered()
		if changed() {
			t.Fatal("the watch wakes an agent whose node refused the rollout for another node's entry")
		}
		if n := w.step(lock.Idle); n != 0 {
			t.Fatalf("another node's entry after this node refused: %d GETs, want 0", n)
		}
	}
	// ...until the refusal is checked again.
	w.now = finished.Add(recheckRefusals)
	if n := w.step(lock.Idle); n != 1 {
		t.Fatalf("a refusal checked again: %d GETs, want 1 (the entries changed since)", n)
	}

	// A new spec is read at once.
	w.write(nil)
	w.delivered()
	if n := w.step(lock.Idle); n != 1 {
		t.Fatalf("a new generation: %d GETs, want 1", n)
	}

	// n1 queued for a job of the new revision, then holding its lock for
	// it: read once then, even with nothing new delivered.
	rev = rollout.Revision("kustodian", "fix", w.ro.copies["fix"].r.Spec)
	if err := w.ro.jobs.Create(&jobs.Job{ID: rolloutJobID("fix", rev), Command: []string{"true"}, State: jobs.Pending,
		Rollout: &jobs.RolloutRef{Name: "fix", UID: "uid-1", Revision: rev}}); err != nil {
		t.Fatal(err)
	}
	if n := w.step(lock.Waiting); n != 0 {
		t.Fatalf("queued, nothing new: %d GETs, want 0", n)
	}
	if n := w.step(lock.Draining); n != 1 {
		t.Fatalf("holding its lock for a job not started: %d GETs, want 1", n)
	}
	if n := w.step(lock.Draining); n != 0 {
		t.Fatalf("holding its lock, read since: %d GETs, want 0", n)
	}
}

// A Node's state label, which every agent changes at each step of a
// maintenance, changes no rollout's selection: alone, it wakes no agent.
func TestTheStateLabelAloneIsNoChangeOfANodesLabels(t *testing.T) {
	for _, c := range []struct {
		old, new map[string]string
		same     bool
	}{
		{map[string]string{"zone": "a", lock.LabelState: "Idle"}, map[string]string{"zone": "a", lock.LabelState: "Waiting"}, true},
		{map[string]string{"zone": "a"}, map[string]string{"zone": "a", lock.LabelState: "Waiting"}, true},
		{map[string]string{"zone": "a", lock.LabelState: "Idle"}, map[string]string{"zone": "b", lock.LabelState: "Idle"}, false},
		{map[string]string{"zone": "a"}, map[string]string{"zone": "a", rollout.LabelRollouts: "enabled"}, false},
	} {
		if got := sameLabelsBut(c.old, c.new, lock.LabelState); got != c.same {
			t.Errorf("%v → %v: the same but for the state label: %v, want %v", c.old, c.new, got, c.same)
		}
	}
}

// A node does not write a summary the watch has shown a later write of
// the rollout to supersede: it would only conflict.
func TestASummaryALaterWriteSupersedesIsNotWritten(t *testing.T) {
	w := newReadWorld(t)
	mine := w.u.DeepCopy()
	if w.ro.writtenSince(mine) {
		t.Fatal("a write shown as later than the rollout as the watch has it")
	}
	w.step(lock.Idle)
	rev := rollout.Revision("kustodian", "fix", w.ro.copies["fix"].r.Spec)
	w.write(&rollout.NodeStatus{Name: "n2", Revision: rev, State: rollout.Refused, Message: "untrusted"})
	if w.ro.writtenSince(mine) {
		t.Fatal("a later write not delivered yet counts")
	}
	w.delivered()
	if !w.ro.writtenSince(mine) {
		t.Fatal("a later write the watch delivered does not supersede this node's summary")
	}
	calls := len(w.dyn.Actions())
	if err := w.ro.summarize(context.Background(), mine, w.nodes, nil); err != nil {
		t.Fatal(err)
	}
	if n := len(w.dyn.Actions()) - calls; n != 0 {
		t.Fatalf("a superseded summary: %d requests, want none", n)
	}
}

// A write the API server refused was not made; one that timed out may
// have been.
func TestAnAnswerToAWriteSaysWhetherItWasNotMade(t *testing.T) {
	gr := rollout.GVR.GroupResource()
	for _, c := range []struct {
		err     error
		refused bool
	}{
		{apierrors.NewTooManyRequests("busy", 1), true},
		{apierrors.NewForbidden(gr, "fix", errors.New("no")), true},
		{apierrors.NewConflict(gr, "fix", errors.New("changed")), true},
		{apierrors.NewTimeoutError("slow", 1), false},
		{apierrors.NewInternalError(errors.New("etcd")), false},
		{apierrors.NewGenericServerResponse(http.StatusRequestTimeout, "patch", gr, "fix", "", 0, false), false},
		{errors.New("connection reset by peer"), false},
	} {
		if got := refused(c.err); got != c.refused {
			t.Errorf("%v: refused %v, want %v", c.err, got, c.refused)
		}
	}
}
