package ctl

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kustodian/kustodian/internal/history"
	"github.com/kustodian/kustodian/internal/picture"
	"github.com/kustodian/kustodian/internal/policy"
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
	pols := map[string]bool{}
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
			notes = append(notes, "overdue")
		}
		r.Note = strings.Join(notes, "; ")
		c.Rows = append(c.Rows, r)
		pols[it.Policy] = true
	}
	if len(pols) == 1 {
		for name := range pols {
			for _, pol := range policies {
				if pol.Name != name || len(pol.Spec.Windows) == 0 {
					continue
				}
				sched, err := policy.ParseSchedule(pol.Spec.Windows, pol.Spec.ExcludeDates)
				if err != nil {
					continue
				}
				from, to := c.Range()
				c.Windows = picture.WindowsOf(func(t time.Time) (bool, time.Time) {
					v := sched.At(t)
					return v.Open, v.Change
				}, from, to, "window of policy "+name)
			}
		}
	}
	return c
}
