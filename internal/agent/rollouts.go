package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"

	"github.com/kustodian/kustodian/internal/hostfiles"
	"github.com/kustodian/kustodian/internal/jobs"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/rollout"
)

// Event reasons of rollouts.
const (
	ReasonRolloutTaken   = "RolloutTaken"
	ReasonRolloutRefused = "RolloutRefused"
	// ReasonRolloutAtRisk: this node's write made a rollout's condition
	// AtRisk true (its deadline needs more nodes at once, or is missed).
	ReasonRolloutAtRisk = "RolloutAtRisk"
)

// rolloutJobID names the managed job of a rollout's revision on this host:
// one job per revision, never made twice.
func rolloutJobID(name, rev string) string { return "rollout-" + name + "-" + rev }

// defaultRetryBackoff is the first wait before a failed rollout runs again
// when its spec says none.
const defaultRetryBackoff = time.Minute

// step takes the MaintenanceRollouts' part of a step of the agent, whose
// node is in state: it marks the Node as one whose host runs rollouts (or
// not), reports this node's rollout jobs in their rollouts' status,
// withdraws a queued one whose rollout stopped, and, when the node is
// Idle, takes the first rollout that reaches it.
func (ro *rollouter) step(ctx context.Context, state lock.State, node *corev1.Node) error {
	if err := ro.markNode(ctx, node); err != nil {
		return err
	}
	if !ro.cfg.Enabled || ro.store == nil {
		return nil
	}
	nodes := ro.nodeFacts()
	ro.wakeAt = time.Time{}
	rs, err := ro.list(ctx, state, nodes)
	if err != nil {
		return err
	}
	ro.observeStages(rs, nodes)
	ro.observeDeadlines(rs, nodes)
	for _, r := range rs {
		if err := ro.reportRollout(ctx, r, nodes, state); err != nil {
			return err
		}
	}
	if err := ro.withdrawOrphan(rs, state); err != nil {
		return err
	}
	if state != lock.Idle {
		return nil
	}
	for _, r := range rs {
		if took, err := ro.takeRollout(ctx, r, nodes, node); err != nil || took {
			return err
		}
	}
	return nil
}

// markNode keeps the Node's label kustodian.io/rollouts as the
// configuration says ("enabled", or absent).
func (ro *rollouter) markNode(ctx context.Context, node *corev1.Node) error {
	if node == nil {
		return nil
	}
	has := node.Labels[rollout.LabelRollouts] == "enabled"
	if has != ro.cfg.Enabled {
		var value *string
		if ro.cfg.Enabled {
			value = ptr.To("enabled")
		}
		if err := ro.label(ctx, rollout.LabelRollouts, value); err != nil {
			return err
		}
	}
	if ro.cfg.Enabled {
		ro.seenRollouts().rolloutsRun(has, ro.now())
	}
	return nil
}

// cachedRollout is a rollout as the agent knows it: its copy as last read
// whole or written (rolloutread.go; shared from step to step, never
// changed in place); when this agent first
// saw each stage of its revision succeed, and the nodes that had taken it
// when this node could first take it (observeStages).
type cachedRollout struct {
	u      *unstructured.Unstructured
	r      *rollout.MaintenanceRollout
	seen   rollout.Seen
	before []string
}

// rolloutNodes are the cluster's nodes as rollouts see them.
func (ro *rollouter) nodeFacts() []rollout.NodeFacts {
	var out []rollout.NodeFacts
	for _, obj := range ro.nodeStore.List() {
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			continue
		}
		facts := rollout.NodeFacts{Name: m.Name, Labels: m.Labels, Created: m.CreationTimestamp.Time}
		if m.Name == ro.node && ro.cfg.Enabled && m.Labels[rollout.LabelRollouts] != "enabled" {
			// markNode labelled it: the informer has not caught up yet.
			facts.Labels = maps.Clone(m.Labels)
			if facts.Labels == nil {
				facts.Labels = map[string]string{}
			}
			facts.Labels[rollout.LabelRollouts] = "enabled"
		}
		out = append(out, facts)
	}
	return out
}

// takeRollout takes r when it reaches this node now: it checks the
// signature and the digests, claims its place in r's status (one write
// with r's resourceVersion, so that two nodes never take the last place of
// a stage), puts the scripts and files in a directory of their own, and
// requests maintenance with the job that runs them. A claim whose job was
// not made (the agent stopped between) is finished here.
func (ro *rollouter) takeRollout(ctx context.Context, c cachedRollout, nodes []rollout.NodeFacts, node *corev1.Node) (bool, error) {
	r := c.r
	rev := rollout.Revision(r.Namespace, r.Name, r.Spec)
	id := rolloutJobID(r.Name, rev)
	if _, err := ro.jobs.Get(id); err == nil {
		return false, nil // taken before: a revision runs once on a host
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, permanent(err)
	}
	e := r.Entry(ro.node)
	resume := e != nil && e.Revision == rev && e.State == rollout.Waiting
	// A refusal checked again keeps the place the node had: its entry
	// stands for it until the check passes and the claim replaces it.
	recheck := e != nil && e.Revision == rev && ro.checkAgain(r, e)
	stage := 0
	switch {
	case resume:
		stage = e.Stage
	case recheck:
		if why := rollout.Halted(r, nodes); why != "" {
			return false, nil
		}
		stage = e.Stage
	default:
		if e != nil && e.Revision == rev && e.State != rollout.Cancelled && e.State != rollout.Deferred {
			return false, nil // refused here, or a job of this revision this host no longer has
		}
		v, err := rollout.Decide(r, ro.node, nodes, ro.room(), ro.now(), c.seen, c.before)
		if err != nil {
			ro.log.Warn("a MaintenanceRollout cannot be decided on; skipping it", "rollout", r.Name, "err", err)
			return false, nil
		}
		if !v.WakeAt.IsZero() {
			ro.wakeBy(v.WakeAt)
		}
		if v.Defer {
			return false, ro.deferRollout(ctx, c, v, nodes)
		}
		if !v.Take {
			return false, nil
		}
		stage = v.Stage
	}
	files, err := ro.checkRollout(ctx, r)
	var ref *refusal
	switch {
	case errors.Is(err, errNotYet):
		ro.log.Info("a rollout waits for its sources", "rollout", r.Name, "why", err)
		return false, nil
	case errors.As(err, &ref):
		ro.refusedAt[r.Name] = ro.now()
		if e != nil && e.Revision == rev && e.State == rollout.Refused && e.Message == rollout.Bounded(rollout.NodeStatus{Message: ref.why}).Message && e.ObservedGeneration == r.Generation {
			return false, nil // checked again, refused again: said already
		}
		// Said once: the Event and the log follow the entry's write, so a
		// write that fails (and is made again) says nothing twice.
		now := metav1.NewTime(ro.now())
		if err := ro.writeEntry(ctx, c, rollout.NodeStatus{Name: ro.node, Revision: rev, Stage: stage, State: rollout.Refused,
			Message: ref.why, Finished: &now, ObservedGeneration: r.Generation}, nodes, false, nil); err != nil || ro.conflict {
			return false, err // not written: said when it is
		}
		ro.log.Warn("refused a rollout", "rollout", r.Name, "revision", rev, "why", ref.why)
		if node != nil {
			ro.event(ctx, node.UID, corev1.EventTypeWarning, ReasonRolloutRefused, fmt.Sprintf("refused rollout %s revision %s: %s", r.Name, rev, ref.why))
		}
		return false, nil
	case err != nil:
		return false, err
	}
	var pp patchPlan
	if r.Spec.Patch != nil {
		if pp = planPatch(r, rev, ro.node); pp.wait != "" {
			ro.log.Debug("a patch campaign waits for its set", "rollout", r.Name, "why", pp.wait)
			return false, nil
		}
		if files, err = patchFiles(pp.order); err != nil {
			return false, permanent(err)
		}
	}
	if !resume || pp.claim != nil {
		started := metav1.NewTime(ro.now())
		if resume && e.Started != nil {
			started = *e.Started
		}
		err := ro.writeEntry(ctx, c, rollout.NodeStatus{Name: ro.node, Revision: rev, Stage: stage, State: rollout.Waiting,
			Message: "queued", Started: &started}, nodes, true, pp.claim)
		if err != nil || ro.conflict {
			return false, err // another node wrote first: decide again on what it wrote
		}
	}
	dir, err := ro.writeRolloutFiles(r.Name, rev, files)
	if err != nil {
		return false, permanent(err)
	}
	job := &jobs.Job{ID: id, Dir: dir, Reboot: jobs.RebootNever, Created: ro.now().UTC(), State: jobs.Pending,
		Rollout: &jobs.RolloutRef{Name: r.Name, UID: string(r.UID), Revision: rev}}
	switch {
	case r.Spec.Patch != nil:
		ro.patchJob(job, r.Spec.Patch, dir)
	default:
		job.Command = scriptCommand(dir, rollout.ScriptName, files[rollout.ScriptName])
		if r.Spec.Reboot == rollout.RebootAuto {
			job.Reboot = jobs.RebootAuto
		}
		if r.Spec.RollbackScript != nil {
			job.Rollback = scriptCommand(dir, rollout.RollbackName, files[rollout.RollbackName])
		}
	}
	if r.Spec.OnFailure.Action == rollout.FailureRetry {
		job.Retries, job.Backoff = r.Spec.OnFailure.Retries, defaultRetryBackoff
		if b := r.Spec.OnFailure.Backoff; b != nil {
			job.Backoff = b.Duration
		}
	}
	if err := ro.jobs.Create(job); err != nil {
		if errors.Is(err, jobs.ErrBusy) {
			return false, nil // a job of `kustodian run` goes first
		}
		return false, permanent(err)
	}
	if _, err := ro.files.CreateRequest(fmt.Sprintf("rollout %s revision %s\n", r.Name, rev)); err != nil {
		if derr := ro.jobs.Discard(id); derr != nil {
			return false, permanent(fmt.Errorf("%w (and job %s could not be removed: %v)", err, id, derr))
		}
		if errors.Is(err, hostfiles.ErrRequested) {
			return false, nil // a maintenance script asked first
		}
		return false, permanent(err)
	}
	ro.log.Info("took a rollout", "rollout", r.Name, "revision", rev, "stage", stage, "job", id)
	if node != nil {
		ro.event(ctx, node.UID, corev1.EventTypeNormal, ReasonRolloutTaken, fmt.Sprintf("took rollout %s revision %s (%s) as job %s", r.Name, rev, rollout.Numbered(stage), id))
	}
	ro.poke()
	return true, nil
}

// deferRollout writes this node's entry Deferred to the stage v says: the
// places of the stages before it were taken before this node could ask,
// and the nodes that hold them keep them.
func (ro *rollouter) deferRollout(ctx context.Context, c cachedRollout, v rollout.Verdict, nodes []rollout.NodeFacts) error {
	rev := rollout.Revision(c.r.Namespace, c.r.Name, c.r.Spec)
	if e := c.r.Entry(ro.node); e != nil && e.Revision == rev && e.State == rollout.Deferred && e.Stage == v.Stage {
		return nil
	}
	ro.log.Info("deferred to a later stage of a rollout", "rollout", c.r.Name, "revision", rev, "stage", v.Stage, "why", v.Why)
	return ro.writeEntry(ctx, c, rollout.NodeStatus{Name: ro.node, Revision: rev, Stage: v.Stage, State: rollout.Deferred, Message: v.Why}, nodes, false, nil)
}

// scriptCommand runs a script by its #! line, or with /bin/sh without one.
func scriptCommand(dir, name string, content []byte) []string {
	path := filepath.Join(dir, name)
	if strings.HasPrefix(string(content), "#!") {
		return []string{path}
	}
	return []string{"/bin/sh", path}
}

// writeEntry writes this node's entry of a rollout, then the summary
// beside the entries when the entry changed it. The entry is a JSON patch
// of that entry alone (rollout.EntryPatch): the entries of different nodes
// never conflict, so a whole fleet writing at once costs each node one
// write. A claim of a place in a count stage (claim), and an entry of a
// rollout whose status has no list of entries (a CRD older than this
// agent's, which does not default it to an empty list), are written with
// the whole status against the resourceVersion this agent decided on: a
// conflict there, or a patch whose entry moved meanwhile, is no error:
// rolloutConflict says so, and the next step decides again.
//
// The summary is written against the resourceVersion the entry's patch
// returned. If it conflicts, another write came after this node's entry,
// and that writer's summary (made from a rollout holding this entry) is
// the one to keep: this node does not try again. A summary that cannot be
// written is logged, not returned: the entry is what the node's decisions
// and the others' read.
func (ro *rollouter) writeEntry(ctx context.Context, c cachedRollout, e rollout.NodeStatus, nodes []rollout.NodeFacts, claim bool, set *rollout.PatchStatus) error {
	ro.conflict = false
	e = rollout.Bounded(e)
	res := ro.dyn.Resource(rollout.GVR).Namespace(c.u.GetNamespace())
	st := rollout.StagesOf(c.r.Spec)
	// A rollout with a pace of its own (a deadline, maxConcurrency) counts
	// the nodes in it as a count stage counts its places.
	paced := c.r.Spec.Deadline != nil || c.r.Spec.MaxConcurrency != nil
	countClaim := claim && e.Stage < len(st) && (st[e.Stage].Nodes != nil || st[e.Stage].Percent != nil || paced)
	written, first, err := ro.putEntry(ctx, res, c, e, nodes, countClaim, set)
	if err == nil && first {
		ro.keep(written) // the whole status, summary and all
		ro.sayAtRisk(ctx, c.u, written)
		return nil
	}
	switch {
	case apierrors.IsConflict(err), apierrors.IsInvalid(err) && strings.Contains(err.Error(), "test"):
		ro.conflict = true
		ro.reread[c.u.GetName()] = true
		ro.poke()
		return nil
	case apierrors.IsNotFound(err):
		return nil // deleted meanwhile
	case err != nil:
		// A write that may have been made (a time-out, not a refusal such
		// as 429): the next step reads the rollout before it decides, so
		// that it does not add this node's entry twice.
		if !refused(err) {
			ro.reread[c.u.GetName()] = true
		}
		return fmt.Errorf("writing this node's entry of MaintenanceRollout %s: %w", c.u.GetName(), err)
	}
	ro.keep(written)
	if err := ro.summarize(ctx, written, nodes, c.seen); err != nil {
		ro.log.Warn("could not write the summary of a rollout; a later entry's writer makes it again", "rollout", written.GetName(), "err", err)
	}
	return nil
}

// putEntry writes e as writeEntry says: a JSON patch of the entry alone,
// or (first: the status has no entries yet, a claim of a place in a count
// stage, whole, or one with a patch campaign's set to write) the whole
// status with the summary made again, against c's resourceVersion.
func (ro *rollouter) putEntry(ctx context.Context, res dynamic.ResourceInterface, c cachedRollout, e rollout.NodeStatus, nodes []rollout.NodeFacts, whole bool, set *rollout.PatchStatus) (*unstructured.Unstructured, bool, error) {
	patch, ok, err := rollout.EntryPatch(c.u, e)
	if err != nil {
		return nil, false, err
	}
	if ok && !whole && set == nil {
		written, err := res.Patch(ctx, c.u.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{FieldManager: "kustodian-agent"}, "status")
		return written, false, err
	}
	st, err := rollout.WithEntrySeen(c.r, e, nodes, ro.room(), ro.now(), c.seen)
	if err != nil {
		return nil, true, err
	}
	if set != nil {
		st.Patch = set
	}
	u, err := rollout.StatusObject(c.u, st)
	if err != nil {
		return nil, true, err
	}
	written, err := res.UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: "kustodian-agent"})
	return written, true, err
}

// summarize writes the summary of a rollout as written (by this node's
// entry) when it differs from what is stored, against that version; a
// conflict leaves it to the later writer, and so does a later write the
// watch has shown already (the write would only conflict, at the full cost
// of one on the API server).
func (ro *rollouter) summarize(ctx context.Context, written *unstructured.Unstructured, nodes []rollout.NodeFacts, seen rollout.Seen) error {
	if ro.writtenSince(written) {
		// It would conflict: a later writer's summary holds this entry.
		ro.log.Debug("the summary of a rollout is left to a later writer", "rollout", written.GetName())
		return nil
	}
	r, err := rollout.FromUnstructured(written)
	if err != nil {
		return err
	}
	st, err := rollout.Summarize(r, nodes, ro.room(), ro.now(), seen)
	if err != nil || !rollout.SummaryDiffers(r, st) {
		return err
	}
	u, err := rollout.StatusObject(written, st)
	if err != nil {
		return err
	}
	unstructured.RemoveNestedField(u.Object, "metadata", "managedFields")
	summarized, err := ro.dyn.Resource(rollout.GVR).Namespace(written.GetNamespace()).UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: "kustodian-agent"})
	switch {
	case apierrors.IsConflict(err), apierrors.IsNotFound(err):
		ro.log.Debug("the summary of a rollout is left to a later writer", "rollout", written.GetName(), "err", err)
		return nil
	case err != nil:
		return err
	}
	ro.keep(summarized)
	ro.sayAtRisk(ctx, written, summarized)
	return nil
}
