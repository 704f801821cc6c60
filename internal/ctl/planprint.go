package ctl

import (
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kustodian/kustodian/internal/status"
)

// clockAt is a predicted time as a plan shows it: its time of day when it
// is within a day of now, else with its date; in UTC.
func clockAt(t time.Time, now time.Time) string {
	u := t.UTC()
	if d := t.Sub(now); d > -24*time.Hour && d < 24*time.Hour && u.Day() == now.UTC().Day() {
		return u.Format("15:04:05")
	}
	return u.Format("Mon 01-02 15:04")
}

// planSummary is the plan in one line.
func planSummary(p MaintenancePlan) string {
	placed, failed := 0, 0
	earliest := false // a node is overdue: the end is the earliest it can be
	var notPlaced, refused []string
	for _, it := range p.Items {
		switch {
		case it.Order == 0:
			notPlaced = append(notPlaced, it.Node)
		case it.Stuck:
			failed++
		default:
			placed++
		}
		earliest = earliest || it.Overdue || it.Later
		for _, r := range it.RefusedEvictions {
			refused = append(refused, it.Node+": "+r.Pod)
		}
	}
	if placed == 0 && failed == 0 && len(notPlaced) == 0 {
		return "Nothing to plan: no node is in maintenance or waiting; name nodes, -l SELECTOR or --policy P to plan a rollout of them."
	}
	var parts []string
	if placed > 0 {
		by := "done by"
		if earliest {
			by = "done at the earliest by"
		}
		parts = append(parts, fmt.Sprintf("%d %s %s %s UTC (%s from the start)", placed, plural(placed, "node", "nodes"), by,
			p.End.UTC().Format("2006-01-02 15:04"), duration.HumanDuration(time.Duration(p.MakespanSeconds)*time.Second)))
	}
	if failed > 0 {
		parts = append(parts, fmt.Sprintf("%d failed, keeping %s lock until released", failed, plural(failed, "its", "their")))
	}
	if len(notPlaced) > 0 {
		parts = append(parts, fmt.Sprintf("%d not placed (%s)", len(notPlaced), shortList(notPlaced, 3)))
	}
	for _, w := range p.Windows {
		if w.Fits {
			parts = append(parts, fmt.Sprintf("policy %s fits its window (closes %s UTC)", w.Policy, clockAt(w.Closes, p.Time)))
			continue
		}
		parts = append(parts, fmt.Sprintf("policy %s does NOT fit its window (closes %s UTC): %s is the first that will not, ending %s after the close; %d %s late",
			w.Policy, clockAt(w.Closes, p.Time), w.FirstLate, duration.HumanDuration(time.Duration(w.OverSeconds)*time.Second), w.Late, plural(w.Late, "node", "nodes")))
	}
	if len(refused) > 0 {
		parts = append(parts, fmt.Sprintf("%d %s a PodDisruptionBudget would keep now (%s)", len(refused), plural(len(refused), "pod", "pods"), shortList(refused, 3)))
	}
	if p.Paused {
		parts = append(parts, "maintenance is paused: nothing starts before kustodian-ctl resume")
	}
	return strings.Join(parts, "; ") + "."
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// shortList is "a, b, c and 4 more".
func shortList(items []string, max int) string {
	if len(items) <= max {
		return strings.Join(items, ", ")
	}
	return strings.Join(items[:max], ", ") + fmt.Sprintf(" and %d more", len(items)-max)
}

func printPlan(w io.Writer, p MaintenancePlan, wide, headers bool) error {
	if len(p.Items) == 0 {
		_, err := fmt.Fprintln(w, p.Summary)
		return err
	}
	tw := newTable(w)
	if headers {
		cols := "ORDER\tNODE\tSTATE\tGROUP\tLOCK\tSTART\tEND\tTAKES\tFROM"
		if wide {
			cols += "\tPOLICY\tDEFERRED BY"
		}
		fmt.Fprintln(tw, cols)
	}
	for _, it := range p.Items {
		order, start, end, takes, from := "-", "-", "-", "-", "-"
		if it.Order > 0 {
			order = fmt.Sprint(it.Order)
			start = clockAt(*it.Start, p.Time)
			switch {
			case it.Stuck:
				end = "failed"
			case it.Overdue:
				end = "overdue"
			case it.Later:
				end = clockAt(*it.End, p.Time) + "+"
			default:
				end = clockAt(*it.End, p.Time)
			}
			takes = duration.HumanDuration(time.Duration(it.EstimateSeconds) * time.Second)
			from = it.EstimateSource
			if it.EstimateSamples > 0 {
				from += fmt.Sprintf(" (%d)", it.EstimateSamples)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", order, it.Node, it.State, orDash(it.Group), orDash(it.Lock), start, end, takes, from)
		if wide {
			fmt.Fprintf(tw, "\t%s\t%s", orDash(it.Policy), orDash(it.DeferredBy))
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var notes []string
	for _, it := range p.Items {
		switch {
		case it.Stuck:
			notes = append(notes, fmt.Sprintf("%s failed and keeps its lock until an admin releases it (kustodian-ctl release %s)", it.Node, it.Node))
		case it.Overdue:
			notes = append(notes, fmt.Sprintf("%s is overdue: in maintenance for longer than its history says; the nodes after it (+) can start no sooner", it.Node))
		}
		if it.NotPlaced != "" {
			notes = append(notes, fmt.Sprintf("%s is not placed: %s", it.Node, status.Printable(it.NotPlaced)))
		}
		if len(it.Gates) > 0 {
			var gs []string
			for _, g := range it.Gates {
				s := g.Gate + " (" + status.Printable(g.Reason)
				switch {
				case g.Opens != nil:
					s += "; opens " + clockAt(*g.Opens, p.Time) + " UTC"
				case g.Seen:
					s += "; as its agent last saw it"
				}
				gs = append(gs, s+")")
			}
			notes = append(notes, fmt.Sprintf("%s would wait now for: %s", it.Node, strings.Join(gs, ", ")))
		}
		for _, r := range it.RefusedEvictions {
			notes = append(notes, fmt.Sprintf("%s: eviction of %s refused now: %s", it.Node, r.Pod, r.Reason))
		}
	}
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
	}
	fmt.Fprintln(w)
	_, err := fmt.Fprintln(w, p.Summary)
	return err
}
