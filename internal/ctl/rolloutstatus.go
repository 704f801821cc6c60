package ctl

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/kustodian/kustodian/internal/status"
)

// RolloutNodeRow is one node of `rollout status`: its entry, or, for a
// selected node without one, why it has not taken the rollout.
type RolloutNodeRow struct {
	Node     string `json:"node"`
	Stage    *int   `json:"stage,omitempty"`
	State    string `json:"state"`
	Attempts int    `json:"attempts,omitempty"`
	Finished string `json:"finished,omitempty"`
	Message  string `json:"message"`
}

// rolloutView is a rollout with its rows, as status shows it.
type rolloutView struct {
	r    *rollout.MaintenanceRollout
	rows []RolloutNodeRow
	// summary is made here from the entries, the spec and the nodes, as
	// the agents make it.
	summary rollout.Status
	// open is the stage open now as far as this reader can be sure
	// (rollout.OpenSurely): what promote opens the stage after.
	open int
	// pace is how many of its nodes may be in it at once, and its
	// predicted end against its deadline.
	pace rollout.Pace
}

func newRolloutStatusCommand(o *options) *cobra.Command {
	var out *output
	var watch bool
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Show a rollout: its stage, counts and conditions, and every selected node's state",
		Long: `status shows a MaintenanceRollout: its revision, the stage open now, how many of
the selected nodes succeeded, and one row per node: its entry (Waiting, Running,
RollingBack, Retrying, Succeeded, Failed, RolledBack, Refused, Cancelled, Deferred) or, for a
selected node that has not taken it, pending with the reason. The summary is made
from the nodes' entries, as the agents make it. -o json|yaml prints the object;
--watch prints a line at each change and a progress line until the rollout is
complete or stopped. kubectl wait --for=condition=Complete maintenancerollout/NAME
waits for it.

Over several clusters (--context A,B, --all-contexts, --fleet FILE): a line per
cluster (with --fleet its ring; not submitted yet, or why it cannot be read),
with --fleet where the fleet rollout stands and its ETA, then every cluster's
nodes with CLUSTER first; --watch prints a line at each change until it ends.`,
		Args: oneArg("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.Check(); err != nil {
				return err
			}
			if o.multi() {
				return o.rolloutStatusClusters(cmd.Context(), args[0], out, watch)
			}
			if watch {
				return o.watchRollout(cmd.Context(), args[0])
			}
			if out.Picture() {
				c, err := o.rolloutPicture(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return out.Draw(o.streams.Out, c)
			}
			if !out.Table() {
				_, u, err := o.getRollout(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return out.Print(o.streams.Out, u, []string{"maintenancerollout.kustodian.io/" + args[0]})
			}
			v, err := o.readRolloutView(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			printRollout(o.streams.Out, v, time.Now(), !out.NoHeaders)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "print each change and a progress line until the rollout is complete or stopped")
	out = addOutputOf(cmd, objectTable, false)
	addPictures(cmd, out)
	return manyClusters(cmd)
}

// readRolloutView reads a rollout and the nodes.
func (o *options) readRolloutView(ctx context.Context, name string) (rolloutView, error) {
	r, _, err := o.getRollout(ctx, name)
	if err != nil {
		return rolloutView{}, err
	}
	return o.viewOf(ctx, r)
}

// viewOf reads the nodes, and the policies when r has a deadline, and
// makes r's view.
func (o *options) viewOf(ctx context.Context, r *rollout.MaintenanceRollout) (rolloutView, error) {
	client, err := o.client()
	if err != nil {
		return rolloutView{}, err
	}
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return rolloutView{}, status.Explain(err, "list", "nodes", "")
	}
	var nodes []rollout.NodeFacts
	for _, n := range list.Items {
		nodes = append(nodes, rollout.NodeFacts{Name: n.Name, Labels: n.Labels, Created: n.CreationTimestamp.Time})
	}
	// A deadline's pace is predicted in the windows and slots of the
	// policy most of the rollout's nodes fall under.
	var room rollout.Room
	if r.Spec.Deadline != nil {
		rd, err := o.reader()
		if err != nil {
			return rolloutView{}, err
		}
		policies, err := rd.ReadPolicies(ctx)
		if err != nil {
			return rolloutView{}, err
		}
		if room, err = rollout.MostRoom(r, nodes, policies); err != nil {
			return rolloutView{}, err
		}
	}
	return rolloutRows(r, nodes, room, time.Now())
}

// rolloutRows makes the rows: every entry of the current revision, then
// the selected nodes without one. The agents time a soak from when each
// saw its stage succeed, which only their hosts know: the stage open and
// the soak's end here are estimated from the entries' finish times.
func rolloutRows(r *rollout.MaintenanceRollout, nodes []rollout.NodeFacts, room rollout.Room, now time.Time) (rolloutView, error) {
	v := rolloutView{r: r}
	est, err := rollout.Estimate(r, nodes)
	if err != nil {
		return v, err
	}
	sum, err := rollout.Summarize(r, nodes, room, now, est)
	if err != nil {
		return v, err
	}
	v.summary = sum
	if v.open, err = rollout.OpenSurely(r, nodes, now); err != nil {
		return v, err
	}
	if v.pace, err = rollout.PaceOf(r, nodes, room, now); err != nil {
		return v, err
	}
	seen := map[string]bool{}
	for _, e := range r.Status.Nodes {
		if e.Revision != sum.Revision {
			continue
		}
		seen[e.Name] = true
		stage := e.Stage
		row := RolloutNodeRow{Node: e.Name, Stage: &stage, State: e.State, Attempts: e.Attempts, Message: e.Message}
		if e.Finished != nil {
			row.Finished = e.Finished.UTC().Format(time.RFC3339)
		}
		if n := len(e.LastLines); n > 0 && (e.State == rollout.Failed || e.State == rollout.RolledBack) && !strings.HasSuffix(row.Message, e.LastLines[n-1]) {
			row.Message += " | " + e.LastLines[n-1]
		}
		if e.State == rollout.Deferred {
			// A deferred node has not taken it: say why it waits now (the
			// rollout stopped, its stage is not open), as for a pending one.
			d, err := rollout.Decide(r, e.Name, nodes, room, now, est, nil)
			if err != nil {
				return v, err
			}
			switch {
			case d.Unselected, d.Defer:
			case d.Take:
				row.Message = fmt.Sprintf("deferred to %s; %s; its agent takes it at its next step", rollout.Numbered(e.Stage), d.Why)
			default:
				row.Message = fmt.Sprintf("deferred to %s; %s", rollout.Numbered(e.Stage), d.Why)
			}
		}
		v.rows = append(v.rows, row)
	}
	for _, n := range nodes {
		if seen[n.Name] {
			continue
		}
		d, err := rollout.Decide(r, n.Name, nodes, room, now, est, nil)
		if err != nil {
			return v, err
		}
		if d.Unselected {
			continue
		}
		if d.Take {
			d.Why += "; its agent takes it at its next step"
		}
		v.rows = append(v.rows, RolloutNodeRow{Node: n.Name, State: "pending", Message: d.Why})
	}
	slices.SortStableFunc(v.rows, func(a, b RolloutNodeRow) int { return strings.Compare(a.Node, b.Node) })
	return v, nil
}

// progressLine is the one line of a rollout's progress.
func progressLine(v rolloutView) string {
	c := v.summary.Counts
	line := fmt.Sprintf("%d/%d succeeded, %d running, %d waiting, %d failed", c.Succeeded, c.Selected, c.Running, c.Waiting, c.Failed)
	if c.Refused > 0 {
		line += fmt.Sprintf(", %d refused", c.Refused)
	}
	if c.Disabled > 0 {
		line += fmt.Sprintf(" (%d selected nodes' hosts run no rollouts)", c.Disabled)
	}
	return line
}

// conditionLine says where the rollout stands, from its conditions.
func conditionLine(v rolloutView) string {
	for _, t := range []string{rollout.ConditionFailed, rollout.ConditionComplete} {
		if c := meta.FindStatusCondition(v.summary.Conditions, t); c != nil && c.Status == metav1.ConditionTrue {
			return t + ": " + c.Message
		}
	}
	if c := meta.FindStatusCondition(v.summary.Conditions, rollout.ConditionProgressing); c != nil {
		return c.Reason + ": " + c.Message
	}
	return ""
}

func printRollout(w io.Writer, v rolloutView, now time.Time, headers bool) {
	stages := rollout.StagesOf(v.r.Spec)
	fmt.Fprintf(w, "maintenancerollout %s: revision %s, %s of %d (%s)\n", v.r.Name, v.summary.Revision, rollout.Numbered(v.summary.Stage), len(stages), rollout.Describe(stages[v.summary.Stage]))
	fmt.Fprintln(w, status.Printable(conditionLine(v)))
	fmt.Fprintln(w, progressLine(v))
	// Each stage with the nodes that succeeded in it and before it, of
	// those it reaches with the stages before.
	var line []string
	done := 0
	for _, st := range v.summary.Stages {
		done += st.Succeeded
		line = append(line, fmt.Sprintf("%d (%s): %s, %d/%d", st.Stage+1, st.Reaches, st.State, done, st.Nodes))
	}
	fmt.Fprintln(w, "stages: "+strings.Join(line, "; "))
	if v.r.Spec.Patch != nil {
		fmt.Fprintln(w, status.Printable(setLine(v.r)))
	}
	if line := paceLine(v); line != "" {
		fmt.Fprintln(w, line)
	}
	if f := v.summary.FirstFailure; f != nil {
		fmt.Fprintf(w, "first failure: node %s, %s: %s\n", status.Printable(f.Name), status.Printable(f.State), status.Printable(f.Message))
		for _, l := range f.LastLines {
			fmt.Fprintf(w, "  | %s\n", status.Printable(l))
		}
	}
	printRolloutRows(w, v, now, headers)
}

// printRolloutRows prints a row per node of a rollout.
func printRolloutRows(w io.Writer, v rolloutView, now time.Time, headers bool) {
	tw := newTable(w)
	if headers {
		fmt.Fprintln(tw, "NODE\tSTAGE\tSTATE\tATTEMPTS\tFINISHED\tMESSAGE")
	}
	for _, r := range v.rows {
		stage, attempts, finished := "-", "-", "-"
		if r.Stage != nil {
			stage = fmt.Sprint(*r.Stage + 1)
		}
		if r.Attempts > 0 {
			attempts = fmt.Sprint(r.Attempts)
		}
		if t, err := time.Parse(time.RFC3339, r.Finished); err == nil {
			finished = age(&t, now) + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", status.Printable(r.Node), stage, status.Printable(r.State), attempts, finished, status.Printable(r.Message))
	}
	tw.Flush()
}

// watchRolloutEvery is how often status --watch reads the rollout again.
var watchRolloutEvery = 2 * time.Second

// watchRollout prints each node's changes and a progress line when it
// changes, until the rollout is complete or has failed.
func (o *options) watchRollout(ctx context.Context, name string) error {
	last := map[string]string{}
	lastProgress := ""
	t := time.NewTicker(watchRolloutEvery)
	defer t.Stop()
	for {
		v, err := o.readRolloutView(ctx, name)
		if err != nil {
			return err
		}
		for _, r := range v.rows {
			line := status.Printable(r.State + ": " + r.Message)
			if last[r.Node] != line {
				fmt.Fprintf(o.streams.Out, "%s %s %s\n", time.Now().Format("15:04:05"), r.Node, line)
				last[r.Node] = line
			}
		}
		progress := progressLine(v) + "; " + status.Printable(conditionLine(v))
		if progress != lastProgress {
			fmt.Fprintf(o.streams.Out, "%s %s\n", time.Now().Format("15:04:05"), progress)
			lastProgress = progress
		}
		for _, c := range []string{rollout.ConditionComplete, rollout.ConditionFailed} {
			if meta.IsStatusConditionTrue(v.summary.Conditions, c) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// setLine says where a patch campaign's set stands.
func setLine(r *rollout.MaintenanceRollout) string {
	s := r.Status.Patch
	switch by := s.ClaimedBy(r.Spec.Signature); {
	case by == "":
		return "set: not resolved yet (the first node the campaign reaches resolves it)"
	case s.ResolvedAt == nil:
		return "set: being resolved on " + by + " (the other nodes install it once its install succeeded)"
	default:
		return fmt.Sprintf("set: %d packages, resolved on %s, proven %s (kustodian-ctl rollout report %s lists every change)", len(s.Packages), by, s.ResolvedAt.UTC().Format(time.RFC3339), r.Name)
	}
}

// paceLine says a rollout's own pace and its deadline ("" without either).
func paceLine(v rolloutView) string {
	d, p := v.r.Spec.Deadline, v.pace
	switch {
	case d != nil && p.Left == 0:
		return fmt.Sprintf("deadline %s: no node is left", d.UTC().Format(time.RFC3339))
	case d != nil && p.Bound == rollout.BoundWindows:
		return fmt.Sprintf("deadline %s: AT RISK, %s", d.UTC().Format(time.RFC3339), p.String())
	case d != nil && p.Bound != "":
		return fmt.Sprintf("deadline %s: AT RISK, predicted end %s even with %s (%s; %d left, about %s each)", d.UTC().Format(time.RFC3339), p.PredictedEnd.UTC().Format(time.RFC3339), rollout.AtOnceWords(p.Limit), p.Bound, p.Left, p.Takes.Round(time.Second))
	case d != nil && p.AtRisk:
		return fmt.Sprintf("deadline %s: one node at a time would miss it; %d nodes at once, predicted end %s (%d left, about %s each)", d.UTC().Format(time.RFC3339), p.Limit, p.PredictedEnd.UTC().Format(time.RFC3339), p.Left, p.Takes.Round(time.Second))
	case d != nil:
		return fmt.Sprintf("deadline %s: predicted end %s one node at a time (%d left, about %s each)", d.UTC().Format(time.RFC3339), p.PredictedEnd.UTC().Format(time.RFC3339), p.Left, p.Takes.Round(time.Second))
	case p.Limit > 0:
		return fmt.Sprintf("pace: at most %d nodes at once (spec.maxConcurrency)", p.Limit)
	}
	return ""
}
