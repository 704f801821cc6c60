package ctl

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kustodian/kustodian/internal/history"
	"github.com/kustodian/kustodian/internal/nodemarks"
	"github.com/kustodian/kustodian/internal/picture"
	"github.com/kustodian/kustodian/internal/policy"
	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/kustodian/kustodian/internal/status"
)

// -o html and -o svg: a timeline of what a command shows (internal/picture),
// one self-contained file.
const (
	outputHTML = "html"
	outputSVG  = "svg"
)

// addPictures lets a command print -o html and -o svg.
func addPictures(cmd *cobra.Command, out *output) {
	out.pictures = true
	if f := cmd.Flags().Lookup("output"); f != nil {
		f.Usage = strings.Replace(f.Usage, " (without -o:", ", html, svg (a timeline: one self-contained file) (without -o:", 1)
	}
}

// Picture is whether -o asks for a picture.
func (o *output) Picture() bool { return o.Format == outputHTML || o.Format == outputSVG }

// Draw writes the chart in the picture format -o asks for.
func (o *output) Draw(w io.Writer, c picture.Chart) error {
	if o.Format == outputSVG {
		return picture.SVG(w, c)
	}
	return picture.HTML(w, c)
}

// historyChart draws the maintenances that ended: a row per node, each
// maintenance's waiting, draining and maintenance as they happened.
func historyChart(h MaintenanceHistory, now time.Time) picture.Chart {
	c := picture.Chart{Title: "Kustodian: maintenances that ended", Now: now}
	byNode := map[string]*picture.Row{}
	var order []string
	var first, last time.Time
	failed := 0
	for _, it := range h.Items {
		r := byNode[it.Node]
		if r == nil {
			r = &picture.Row{Label: it.Node}
			byNode[it.Node] = r
			order = append(order, it.Node)
		}
		r.Actual = append(r.Actual, entrySpans(it.Entry)...)
		if len(it.Escalated) > 0 {
			r.Note = strings.TrimPrefix(r.Note+"; ", "; ") + "pods deleted past their budget: " + strings.Join(it.Escalated, ", ")
		}
		if it.Result == history.Failed {
			failed++
			r.Failed = true
			r.Note = strings.TrimPrefix(r.Note+"; ", "; ") + fmt.Sprintf("failed %s: %s", it.Ended.UTC().Format(time.RFC3339), status.Printable(it.Message))
		} else {
			r.Failed = false // the last maintenance decides the mark
		}
		if first.IsZero() || it.Requested.Before(first) {
			first = it.Requested
		}
		if it.Ended.After(last) {
			last = it.Ended
		}
	}
	sort.Strings(order)
	for _, n := range order {
		c.Rows = append(c.Rows, *byNode[n])
	}
	if len(h.Items) == 0 {
		c.Summary = []string{"No maintenance has ended on these nodes yet."}
		return c
	}
	c.Now = time.Time{} // a history ends at its last maintenance
	c.Summary = []string{fmt.Sprintf("%d maintenances on %d nodes from %s to %s UTC (%s); %d failed",
		len(h.Items), len(order), first.UTC().Format("2006-01-02 15:04"), last.UTC().Format("2006-01-02 15:04"), duration.HumanDuration(last.Sub(first)), failed)}
	return c
}

// entrySpans are a past maintenance's phases: waiting for the lock,
// draining, then the maintenance until it ended.
func entrySpans(e history.Entry) []picture.Span {
	if e.Started.IsZero() {
		return []picture.Span{{Phase: picture.Waiting, From: e.Requested, To: e.Ended}}
	}
	out := []picture.Span{{Phase: picture.Waiting, From: e.Requested, To: e.Started}}
	if e.Drained.IsZero() {
		return append(out, picture.Span{Phase: picture.Draining, From: e.Started, To: e.Ended})
	}
	return append(out, picture.Span{Phase: picture.Draining, From: e.Started, To: e.Drained},
		picture.Span{Phase: picture.Maintenance, From: e.Drained, To: e.Ended})
}

// planChart draws a plan: each node's predicted wait and maintenance, the
// windows of the policy its nodes share (when they share one), and what
// holds each node.
func planChart(p MaintenancePlan, policies []*policy.MaintenancePolicy) picture.Chart {
	c := picture.Chart{Title: "Kustodian: plan", Now: p.Time, Summary: []string{p.Summary}}
	pols := map[string]int{}
	for _, it := range p.Items {
		r := picture.Row{Label: it.Node, Failed: it.Stuck}
		if it.Start != nil {
			if it.Start.After(p.Time) {
				r.Predicted = append(r.Predicted, picture.Span{Phase: picture.Waiting, From: p.Time, To: *it.Start})
			}
			end := p.Time
			if it.End != nil {
				end = *it.End
			}
			r.Predicted = append(r.Predicted, picture.Span{Phase: picture.Maintenance, From: *it.Start, To: end})
		}
		var notes []string
		if it.NotPlaced != "" {
			notes = append(notes, "not placed: "+status.Printable(it.NotPlaced))
		}
		if it.DeferredBy != "" {
			notes = append(notes, "deferred by "+it.DeferredBy)
		}
		for _, g := range it.Gates {
			notes = append(notes, g.Gate+": "+status.Printable(g.Reason))
		}
		for _, e := range it.RefusedEvictions {
			notes = append(notes, "eviction of "+e.Pod+" refused: "+status.Printable(e.Reason))
		}
		if it.Overdue {
			r.Late = true
			notes = append(notes, "overdue: in maintenance longer than its history says")
		}
		r.Note = strings.Join(notes, "; ")
		c.Rows = append(c.Rows, r)
		pols[it.Policy]++
	}
	if len(pols) == 1 {
		c.Windows = windowsOf(c, policies, pols)
	}
	return c
}

// rolloutPicture reads what a rollout's chart is made of and draws it.
func (o *options) rolloutPicture(ctx context.Context, name string) (picture.Chart, error) {
	r, _, err := o.getRollout(ctx, name)
	if err != nil {
		return picture.Chart{}, err
	}
	rd, err := o.reader()
	if err != nil {
		return picture.Chart{}, err
	}
	in, err := rd.Inputs(ctx)
	if err != nil {
		return picture.Chart{}, err
	}
	return rolloutChart(r, in)
}

// rolloutChart draws a rollout: for each node that took it, its
// maintenance as its history has it (waiting, draining, maintenance),
// else from when it took the rollout to when it finished; for each node
// left, its predicted maintenance (the plan's predictor); the soak after
// each stage; the windows of the policy most of its nodes fall under; the
// deadline.
func rolloutChart(r *rollout.MaintenanceRollout, in status.Inputs) (picture.Chart, error) {
	now := in.Now
	var facts []rollout.NodeFacts
	hist := map[string][]history.Entry{}
	policyOf := map[string]string{}
	quarantined := map[string]bool{}
	for _, n := range in.Nodes {
		_, quarantined[n.Name] = n.Annotations[nodemarks.AnnotationQuarantined]
		facts = append(facts, rollout.NodeFacts{Name: n.Name, Labels: n.Labels, Created: n.CreationTimestamp.Time})
		hist[n.Name], _ = history.Parse(n.Annotations[history.Annotation])
		policyOf[n.Name] = policy.Resolve(in.Policies, n.Labels).Name
	}
	var room rollout.Room
	if r.Spec.Deadline != nil && in.PoliciesErr == nil {
		var err error
		if room, err = rollout.MostRoom(r, facts, in.Policies); err != nil {
			return picture.Chart{}, err
		}
	}
	v, err := rolloutRows(r, facts, room, now)
	if err != nil {
		return picture.Chart{}, err
	}
	c := picture.Chart{Title: fmt.Sprintf("Kustodian: maintenancerollout %s, revision %s", r.Name, v.summary.Revision), Now: now,
		Summary: []string{progressLine(v), status.Printable(conditionLine(v))}}
	if d := r.Spec.Deadline; d != nil {
		t := d.Time
		c.Deadline = &t
		if line := paceLine(v); line != "" {
			c.Summary = append(c.Summary, line)
		}
	}
	entries := map[string]rollout.NodeStatus{}
	for _, e := range r.Status.Nodes {
		if e.Revision == v.summary.Revision {
			entries[e.Name] = e
		}
	}
	var left []string
	for _, row := range v.rows {
		if _, ok := entries[row.Node]; !ok || row.State == rollout.Waiting || row.State == rollout.Deferred {
			left = append(left, row.Node)
		}
	}
	var fc status.Forecast
	if in.PoliciesErr == nil {
		fc = status.ForecastOf(in, status.Build(in), left, now)
	}
	counted := map[string]int{}
	stageEnds := map[int]time.Time{}
	for _, row := range v.rows {
		pr := picture.Row{Label: row.Node, Note: status.Printable(row.State + ": " + row.Message), Quarantined: quarantined[row.Node]}
		if e, ok := entries[row.Node]; ok && e.Started != nil {
			end := now
			if e.Finished != nil {
				end = e.Finished.Time
				if end.After(stageEnds[e.Stage]) {
					stageEnds[e.Stage] = end
				}
			}
			pr.Actual = rolloutSpans(hist[row.Node], e.Started.Time, end)
			pr.Failed = e.State == rollout.Failed || e.State == rollout.RolledBack
		}
		if fn, ok := fc.Nodes[row.Node]; ok && fn.Unplaced == "" && slices.Contains(left, row.Node) {
			pr.Predicted = []picture.Span{{Phase: picture.Maintenance, From: fn.Entry.Start, To: fn.Entry.End}}
			pr.Late = fn.Entry.Overdue
		}
		counted[policyOf[row.Node]]++
		c.Rows = append(c.Rows, pr)
	}
	// The soak after each stage that ended, with an automatic promotion.
	if p := r.Spec.Promotion; p.Mode == rollout.PromotionAuto && p.Soak != nil && p.Soak.Duration > 0 {
		stages := rollout.StagesOf(r.Spec)
		for k := 0; k < len(stages)-1; k++ {
			if end, ok := stageEnds[k]; ok && k < v.summary.Stage+1 {
				c.Rows = append(c.Rows, picture.Row{Label: "soak after " + rollout.Numbered(k),
					Actual: []picture.Span{{Phase: picture.Soak, From: end, To: end.Add(p.Soak.Duration)}}})
			}
		}
	}
	c.Windows = windowsOf(c, in.Policies, counted)
	return c, nil
}

// rolloutSpans are a node's maintenance for a rollout, from when it took
// it to end: the phases of the history entry that falls in that time, else
// one span (the maintenance, as far as anyone can tell).
func rolloutSpans(entries []history.Entry, from, to time.Time) []picture.Span {
	for _, e := range entries {
		if !e.Requested.Before(from.Add(-2*time.Second)) && !e.Ended.After(to.Add(2*time.Second)) {
			return entrySpans(e)
		}
	}
	return []picture.Span{{Phase: picture.Maintenance, From: from, To: to}}
}

// windowsOf are the windows, over the chart's times, of the policy most of
// its nodes fall under (counted: how many by policy); none when that
// policy has none or cannot be read.
func windowsOf(c picture.Chart, policies []*policy.MaintenancePolicy, counted map[string]int) []picture.Window {
	most, best := "", 0
	for name, n := range counted {
		if n > best || (n == best && name < most) {
			most, best = name, n
		}
	}
	for _, pol := range policies {
		if pol.Name != most || len(pol.Spec.Windows) == 0 {
			continue
		}
		sched, err := policy.ParseSchedule(pol.Spec.Windows, pol.Spec.ExcludeDates)
		if err != nil {
			return nil
		}
		from, to := c.Range()
		return picture.WindowsOf(func(t time.Time) (bool, time.Time) {
			v := sched.At(t)
			return v.Open, v.Change
		}, from, to, "window of policy "+most)
	}
	return nil
}
