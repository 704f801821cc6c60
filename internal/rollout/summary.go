package rollout

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types of a rollout (kubectl wait --for=condition=Complete).
const (
	ConditionProgressing = "Progressing"
	ConditionComplete    = "Complete"
	ConditionFailed      = "Failed"
)

// finalFailure: the node failed for good in this revision.
func finalFailure(state string) bool {
	return state == Failed || state == RolledBack || state == Refused
}

// Summarize is the rollout's status with its summary made again from the
// nodes' entries, the spec and the nodes: the revision, the open stage,
// the counts, the first failure and the conditions (their transition times
// kept while they hold). A node writes it after its own entry, against
// the version that write returned, so it is as fresh as the last entry
// written. The open stage and the soak are as
// seen says (Seen: the writer's own observation; Estimate for a reader
// that has none). The deadline's condition is predicted in room (Pace).
func Summarize(r *MaintenanceRollout, nodes []NodeFacts, room Room, now time.Time, seen Seen) (Status, error) {
	v, err := newView(r, nodes)
	if err != nil {
		return Status{}, err
	}
	st := r.Status
	st.Revision = v.rev
	open, soakEnds := v.open(now, seen)
	st.Stage = open
	st.Counts = Counts{Selected: len(v.eligible), Disabled: len(v.selected) - len(v.eligible)}
	st.Stages = v.stageStatus(open)
	for _, e := range v.entries {
		switch e.State {
		case Waiting:
			st.Counts.Waiting++
		case Running, RollingBack, Retrying:
			st.Counts.Running++
		case Succeeded:
			st.Counts.Succeeded++
		case Failed, RolledBack:
			st.Counts.Failed++
		case Refused:
			st.Counts.Refused++
		}
	}
	st.FirstFailure = nil
	if v.failure != nil {
		f := *v.failure
		st.FirstFailure = &f
	}
	complete, _ := v.succeeded(len(v.stages) - 1)
	complete = complete && open == len(v.stages)-1
	set := func(t string, ok bool, reason, msg string) {
		s := metav1.ConditionFalse
		if ok {
			s = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: s, Reason: reason, Message: msg,
			ObservedGeneration: r.Generation, LastTransitionTime: metav1.NewTime(now)})
	}
	doneMsg := fmt.Sprintf("%d of %d nodes succeeded", st.Counts.Succeeded, st.Counts.Selected)
	switch {
	case st.FirstFailure != nil:
		f := st.FirstFailure
		set(ConditionFailed, true, f.State, fmt.Sprintf("node %s: %s", f.Name, f.Message))
		set(ConditionComplete, false, "Stopped", doneMsg)
		if v.stopped != nil {
			set(ConditionProgressing, false, "Stopped", "stopped at "+Numbered(open)+" by node "+v.stopped.Name)
		} else {
			set(ConditionProgressing, true, "Refused", "node "+f.Name+" refused it; the others go on")
		}
	case complete:
		set(ConditionFailed, false, "NoFailure", doneMsg)
		set(ConditionComplete, true, "Succeeded", doneMsg)
		set(ConditionProgressing, false, "Succeeded", doneMsg)
	default:
		set(ConditionFailed, false, "NoFailure", doneMsg)
		set(ConditionComplete, false, "InProgress", doneMsg)
		reason, msg := "Running", fmt.Sprintf("%s of %d: %s", Numbered(open), len(v.stages), doneMsg)
		stageDone, _ := v.succeeded(open)
		switch {
		case r.Spec.Aborted:
			reason, msg = "Aborted", "aborted: no node starts it any more"
		case r.Spec.Paused:
			reason, msg = "Paused", "paused: no node starts it until resumed"
		case v.stopped != nil:
			reason, msg = "Retrying", fmt.Sprintf("node %s failed and tries again", v.stopped.Name)
		case stageDone && !soakEnds.IsZero():
			// About: each agent times the soak from when it saw the stage
			// succeed, and a reader without an observation of its own
			// estimates it from the times the nodes wrote.
			reason, msg = "Soaking", fmt.Sprintf("%s succeeded; the next opens at about %s (each node waits %s from when it saw the stage succeed)", Numbered(open), soakEnds.UTC().Format(time.RFC3339), v.soak())
		case stageDone:
			reason, msg = "AwaitingPromotion", fmt.Sprintf("%s succeeded; kustodian-ctl rollout promote %s opens the next", Numbered(open), r.Name)
		}
		set(ConditionProgressing, !r.Spec.Aborted, reason, msg)
	}
	if d := r.Spec.Deadline; d == nil {
		meta.RemoveStatusCondition(&st.Conditions, ConditionAtRisk)
	} else {
		p := v.pace(room, now)
		// The deadline as given; the predicted end to the minute, so that
		// the condition does not change with every look.
		exact := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }
		minute := func(t time.Time) string { return "about " + t.UTC().Truncate(time.Minute).Format("2006-01-02T15:04Z") }
		switch {
		case complete || st.FirstFailure != nil && v.stopped != nil:
			set(ConditionAtRisk, false, "Ended", "the rollout ended; its deadline was "+exact(d.Time))
		case !p.AtRisk:
			set(ConditionAtRisk, false, "OnTime", fmt.Sprintf("one node at a time ends by the deadline %s: predicted end %s", exact(d.Time), minute(p.PredictedEnd)))
		case p.Bound == BoundWindows:
			set(ConditionAtRisk, true, "DeadlineMissed", fmt.Sprintf("%d nodes left, and %s: the deadline %s is missed", p.Left, noWindow, exact(d.Time)))
		case p.Bound != "":
			set(ConditionAtRisk, true, "DeadlineMissed", fmt.Sprintf("predicted end %s, after the deadline %s even with %s (%s)", minute(p.PredictedEnd), exact(d.Time), AtOnceWords(p.Limit), p.Bound))
		default:
			set(ConditionAtRisk, true, "PaceRaised", fmt.Sprintf("one node at a time would end after the deadline %s: %d nodes at once now, predicted end %s", exact(d.Time), p.Limit, minute(p.PredictedEnd)))
		}
	}
	return st, nil
}

// stageStatus is how far each stage has come, open the stage open now.
func (v *view) stageStatus(open int) []StageStatus {
	var out []StageStatus
	for k, s := range v.stages {
		ss := StageStatus{Stage: k, Reaches: Describe(s), State: StagePending}
		ss.Nodes = len(v.reach[k])
		for _, e := range v.entries {
			if e.Stage != k || e.State == Deferred {
				continue
			}
			ss.Took++
			switch {
			case e.State == Succeeded:
				ss.Succeeded++
			case finalFailure(e.State):
				ss.Failed++
			}
		}
		if k <= open {
			ss.State = StageOpen
			if done, _ := v.succeeded(k); done {
				ss.State = StageSucceeded
			} else if ss.Failed > 0 {
				ss.State = StageFailed
			}
		}
		out = append(out, ss)
	}
	return out
}

// Numbered names stage k as people count: "stage 1" is the first. The
// object's fields (spec.promoted, status.stage, an entry's stage) index
// the stages from 0; every message and the command line count from 1.
func Numbered(k int) string { return fmt.Sprintf("stage %d", k+1) }

// Describe says what a stage reaches: "1 node", "25%", a selector, "all".
func Describe(s Stage) string {
	switch {
	case s.Nodes != nil && *s.Nodes == 1:
		return "1 node"
	case s.Nodes != nil:
		return fmt.Sprintf("%d nodes", *s.Nodes)
	case s.Percent != nil:
		return fmt.Sprintf("%d%%", *s.Percent)
	case s.Selector != nil:
		if sel, err := metav1.LabelSelectorAsSelector(s.Selector); err == nil {
			return sel.String()
		}
	}
	return "all"
}
