package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kustodian/kustodian/internal/jobs"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/rollout"
)

// What an agent reads of the MaintenanceRollouts. Every node writes its
// entry in the one rollout, so a watch of the whole objects would send
// each write, with every entry, to every agent: about N³ bytes over a
// stage that reaches N nodes at once. The agent watches their metadata
// only, and reads a rollout whole (GET) when that may change what it does
// (following):
//
//   - at once, when the rollout is new or its spec changed (generation),
//     when this node's last write of it met another's, and once when this
//     node holds its lock for a job of it that has not started: a job of
//     a rollout that stopped meanwhile must not start;
//   - paced, at most once every rolloutPace, when it changed and this node
//     may still take it (its stage is not open yet, say) or is queued for
//     a job of it;
//   - not at all while this node is done with its revision (succeeded,
//     failed, refused until the refusal is checked again) or the rollout
//     does not reach this node.
//
// An entry this node writes comes back whole: it counts as a read.

// follow is how closely the agent follows a rollout's changes.
type follow int

const (
	followNot follow = iota
	followPaced
	followNow
)

// rolloutPace is the least time between two reads of a rollout that
// changed, for a node that follows it paced: a twentieth of a second per
// node of the cluster (so that the nodes following it read it about 20
// times a second in all), from one second to two minutes.
func rolloutPace(nodes int) time.Duration {
	return min(max(time.Duration(nodes)*50*time.Millisecond, time.Second), 2*time.Minute)
}

// rolloutCopy is the newest whole copy of a rollout this agent has: read,
// or returned by its own write.
type rolloutCopy struct {
	u    *unstructured.Unstructured
	r    *rollout.MaintenanceRollout
	read time.Time // when it was read or written
}

// rolloutInterest is what the rollouts' watch needs to know to wake the
// agent on a change: how closely it follows each rollout, and until when
// a change of a rollout followed paced waits for the next read (the step
// sets a timer for it). The watch's goroutine reads it; the step writes it.
type rolloutInterest struct {
	mu     sync.Mutex
	follow map[string]follow
	until  map[string]time.Time
}

// wakes says whether a change of rollout name (its spec and UID the same)
// is worth a step now.
func (in *rolloutInterest) wakes(name string, now time.Time) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	switch in.follow[name] {
	case followNow:
		return true
	case followPaced:
		return !now.Before(in.until[name])
	}
	return false
}

func (in *rolloutInterest) set(name string, f follow, until time.Time) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.follow == nil {
		in.follow, in.until = map[string]follow{}, map[string]time.Time{}
	}
	in.follow[name], in.until[name] = f, until
}

func (in *rolloutInterest) forget(name string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	delete(in.follow, name)
	delete(in.until, name)
}

// rolloutChanged says whether a change the rollouts' watch delivered is
// worth a step.
func (ro *rollouter) rolloutChanged(oldObj, newObj any) bool {
	o, ok1 := oldObj.(*metav1.PartialObjectMetadata)
	n, ok2 := newObj.(*metav1.PartialObjectMetadata)
	if !ok1 || !ok2 || o.UID != n.UID || o.Generation != n.Generation || !o.DeletionTimestamp.Equal(n.DeletionTimestamp) {
		return true
	}
	return ro.interest.wakes(n.Name, ro.now())
}

// list is the rollouts of the namespace, oldest first, each as this agent
// follows it: read whole again where following says so.
func (ro *rollouter) list(ctx context.Context, state lock.State, nodes []rollout.NodeFacts) ([]cachedRollout, error) {
	if state == lock.Waiting || state == lock.Idle {
		ro.checkedHeld = ""
	}
	pace := rolloutPace(len(nodes))
	live := map[string]bool{}
	var out []cachedRollout
	for _, obj := range ro.store.List() {
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			continue
		}
		live[m.Name] = true
		c := ro.copies[m.Name]
		if c != nil && c.u.GetUID() != m.UID {
			c = nil // deleted and made again
		}
		f, heldJob := followNot, ""
		if c != nil && c.r != nil {
			f, heldJob = ro.following(c.r, nodes, state)
		}
		stale := c != nil && compare(c.u.GetResourceVersion(), m.ResourceVersion) < 0
		due := c != nil && !ro.now().Before(c.read.Add(pace))
		read := c == nil || c.u.GetGeneration() < m.Generation || ro.reread[m.Name] || heldJob != "" ||
			stale && (f == followNow || f == followPaced && due)
		if read {
			var err error
			if c, err = ro.read(ctx, m); err != nil {
				return nil, err
			}
			if c == nil {
				continue // deleted meanwhile
			}
			delete(ro.reread, m.Name)
			if heldJob != "" {
				ro.checkedHeld = heldJob
			}
			f = followNot
			if c.r != nil {
				f, _ = ro.following(c.r, nodes, state)
			}
		}
		if c.r == nil {
			continue // cannot be read as a rollout: said when read
		}
		until := time.Time{}
		if f == followPaced {
			// A change seen after this step waits for the next read: a
			// step comes then.
			until = c.read.Add(pace)
			if until.After(ro.now()) {
				ro.wakeBy(until)
			}
		}
		ro.interest.set(m.Name, f, until)
		out = append(out, cachedRollout{u: c.u, r: c.r})
	}
	for name := range ro.copies {
		if !live[name] {
			delete(ro.copies, name)
			delete(ro.reread, name)
			ro.interest.forget(name)
		}
	}
	slices.SortFunc(out, func(x, y cachedRollout) int {
		if c := x.r.CreationTimestamp.Compare(y.r.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(x.r.Name, y.r.Name)
	})
	return out, nil
}

// read reads rollout m whole (nil: it is gone).
func (ro *rollouter) read(ctx context.Context, m *metav1.PartialObjectMetadata) (*rolloutCopy, error) {
	u, err := ro.dyn.Resource(rollout.GVR).Namespace(m.Namespace).Get(ctx, m.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		delete(ro.copies, m.Name)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading MaintenanceRollout %s: %w", m.Name, err)
	}
	return ro.keep(u), nil
}

// keep keeps u, read or returned by a write, as the rollout's copy unless
// the copy is newer. A copy that cannot be read as a rollout (said once)
// has no r: the rollout is skipped until it changes.
func (ro *rollouter) keep(u *unstructured.Unstructured) *rolloutCopy {
	name := u.GetName()
	if c := ro.copies[name]; c != nil && c.u.GetUID() == u.GetUID() && compare(u.GetResourceVersion(), c.u.GetResourceVersion()) < 0 {
		return c
	}
	r, err := rollout.FromUnstructured(u)
	if err != nil {
		ro.log.Warn("a MaintenanceRollout cannot be read; skipping it", "rollout", name, "err", err)
		r = nil
	}
	c := &rolloutCopy{u: u, r: r, read: ro.now()}
	ro.copies[name] = c
	return c
}

// following says how closely this agent follows rollout r (see above),
// and, when this node holds its lock for a job of r that has not started
// and r was not read since, that job's ID.
func (ro *rollouter) following(r *rollout.MaintenanceRollout, nodes []rollout.NodeFacts, state lock.State) (follow, string) {
	rev := rollout.Revision(r.Namespace, r.Name, r.Spec)
	if j, err := ro.jobs.Get(rolloutJobID(r.Name, rev)); err == nil {
		switch {
		case j.Done():
			return followNot, ""
		case j.State == jobs.Pending && state != lock.Waiting && state != lock.Idle && ro.checkedHeld != j.ID:
			return followNow, j.ID
		}
		return followPaced, ""
	}
	if e := r.Entry(ro.node); e != nil && e.Revision == rev {
		switch e.State {
		case rollout.Refused:
			if !ro.checkAgain(r, e) {
				return followNot, ""
			}
		case rollout.Deferred, rollout.Cancelled, rollout.Waiting:
		default:
			return followNot, "" // a job of this revision this host no longer has
		}
	}
	if look, err := rollout.Observe(r, nodes, ro.node); err == nil && !look.Eligible {
		return followNot, ""
	}
	return followPaced, ""
}

// wakeBy makes the rollouts' next step come by t at the latest.
func (ro *rollouter) wakeBy(t time.Time) {
	if ro.wakeAt.IsZero() || t.Before(ro.wakeAt) {
		ro.wakeAt = t
	}
}

// writtenSince says whether the rollouts' watch has shown a write of u's
// rollout after u.
func (ro *rollouter) writtenSince(u *unstructured.Unstructured) bool {
	obj, ok, err := ro.store.GetByKey(u.GetNamespace() + "/" + u.GetName())
	if err != nil || !ok {
		return false
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	return ok && m.UID == u.GetUID() && compare(u.GetResourceVersion(), m.ResourceVersion) < 0
}

// refused says whether the API server answered err to a write it did not
// make: a 4xx but a time-out.
func refused(err error) bool {
	var s apierrors.APIStatus
	if !errors.As(err, &s) {
		return false
	}
	code := s.Status().Code
	return code >= 400 && code < 500 && code != http.StatusRequestTimeout
}
