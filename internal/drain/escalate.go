package drain

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Escalation is what a policy allows once drain.timeout has passed with
// pods left: deleting, without eviction, the pods a PodDisruptionBudget
// holds in the namespaces Allowed says yes to. Never any other pod.
type Escalation struct {
	// Allowed says whether pods of namespace may be deleted past their
	// PodDisruptionBudget; an error leaves them (and is reported).
	Allowed func(ctx context.Context, namespace string) (bool, error)
	// Deleted is told of each pod deleted, with the budget that held it
	// (an Event on the pod and the node, a line in the history).
	Deleted func(ctx context.Context, namespace, name, why string)
}

// StuckError is a drain that timed out: the pods that would not go.
type StuckError struct {
	Pods []string // namespace/name, and why when kubectl refuses one
	Err  error
}

func (e *StuckError) Error() string {
	if len(e.Pods) == 0 {
		return e.Err.Error()
	}
	const most = 5
	pods := e.Pods
	more := ""
	if len(pods) > most {
		pods, more = pods[:most], fmt.Sprintf(" and %d more", len(e.Pods)-most)
	}
	return fmt.Sprintf("%v; %s %s%s would not go", e.Err, plural(len(e.Pods), "pod", "pods"), strings.Join(pods, ", "), more)
}

func (e *StuckError) Unwrap() error { return e.Err }

// Stuck returns the pods of a drain that timed out; nil for other errors.
func Stuck(err error) []string {
	var se *StuckError
	if errors.As(err, &se) {
		return se.Pods
	}
	return nil
}

// left is the pods still on the node as of the last step.
func (r *drainRun) left() []string {
	var out []string
	for _, st := range r.pods {
		out = append(out, st.key)
	}
	sort.Strings(out)
	return append(out, r.refused...)
}

// escalate deletes the pods a PodDisruptionBudget still holds whose
// namespace the policy names, each with its own grace period and only the
// very pod seen (its UID). It returns how many it deleted.
func (d *Drainer) escalate(ctx context.Context, run *drainRun) (int, error) {
	e := d.Escalation
	allowed := map[string]bool{}
	var held []*podState
	for _, st := range run.pods {
		if st.pdb && !st.evicted {
			held = append(held, st)
		}
	}
	sort.Slice(held, func(i, j int) bool { return held[i].key < held[j].key })
	deleted := 0
	for _, st := range held {
		key := st.key
		ns, name, _ := strings.Cut(key, "/")
		ok, seen := allowed[ns]
		if !seen {
			var err error
			if ok, err = e.Allowed(ctx, ns); err != nil {
				return deleted, fmt.Errorf("escalating the drain: %w", err)
			}
			allowed[ns] = ok
		}
		if !ok {
			continue
		}
		uid := st.uid
		err := d.podsClient().CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return deleted, fmt.Errorf("escalating the drain: deleting pod %s: %w", key, err)
		}
		why := st.blocked
		st.evicted, st.blocked, st.pdb = true, "", false
		if err != nil {
			continue // gone, or replaced: nothing deleted
		}
		deleted++
		d.Log.Warn("deleted pod past its PodDisruptionBudget (the policy's drain.escalate)", "pod", key, "was", why)
		if e.Deleted != nil {
			e.Deleted(ctx, ns, name, why)
		}
	}
	return deleted, nil
}
