package ctl

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/predict"
	"github.com/kustodian/kustodian/internal/status"
)

func age(t *time.Time, now time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(*t))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printHeader prints who holds the locks, whether the rollout is paused,
// and Kured's lock.
func printHeader(w io.Writer, s status.MaintenanceStatus) {
	tw := newTable(w)
	groups := map[string][]status.Lock{}
	for _, l := range s.Locks {
		groups[l.Group] = append(groups[l.Group], l)
	}
	for _, n := range s.Nodes {
		if n.Group != "" {
			if _, ok := groups[n.Group]; !ok {
				groups[n.Group] = nil
			}
		}
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	sort.Strings(names)
	if len(names) == 0 {
		fmt.Fprintf(tw, "Lock:\tnone taken yet\n")
	}
	for _, g := range names {
		var held []string
		for _, l := range groups[g] {
			if l.Holder != "" {
				held = append(held, fmt.Sprintf("%s for %s (%s)", l.Holder, age(l.Since, s.Time), l.Name))
			}
		}
		if len(held) == 0 {
			fmt.Fprintf(tw, "Lock %s:\tfree\n", g)
		} else {
			fmt.Fprintf(tw, "Lock %s:\theld by %s\n", g, strings.Join(held, ", "))
		}
	}
	if s.Paused {
		reason := s.PausedReason
		if reason == "" {
			reason = "no reason given"
		}
		fmt.Fprintf(tw, "Paused:\tyes: %s (kustodian-ctl resume)\n", reason)
	} else {
		fmt.Fprintf(tw, "Paused:\tno\n")
	}
	if s.Kured != nil {
		switch {
		case s.Kured.Error != "":
			fmt.Fprintf(tw, "Kured:\tunreadable lock: %s\n", s.Kured.Error)
		case len(s.Kured.Holders) == 0:
			fmt.Fprintf(tw, "Kured:\tlock free\n")
		default:
			fmt.Fprintf(tw, "Kured:\tlock held by %s\n", strings.Join(s.Kured.Holders, ", "))
		}
	}
	tw.Flush()
}

// printNodes prints one row per node.
func printNodes(w io.Writer, s status.MaintenanceStatus, nodes []status.Node, wide, headers bool) {
	tw := newTable(w)
	cols := "NODE\tSTATE\tSINCE\tQUEUE\tREASON\tMESSAGE"
	if wide {
		cols += "\tGROUP\tREQUEST\tHEARTBEAT\tCORDONED-BY\tCONDITIONS"
	}
	if headers {
		fmt.Fprintln(tw, cols)
	}
	for _, n := range nodes {
		queue := "-"
		if n.QueuePosition > 0 {
			queue = fmt.Sprint(n.QueuePosition)
		} else if n.State == lock.Waiting && !n.Live {
			queue = "dead"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s", n.Name, n.State, age(n.Since, s.Time), queue, orDash(n.Reason), orDash(n.Message))
		if wide {
			hb := "-"
			if n.HeartbeatAge != nil {
				hb = duration.HumanDuration(time.Duration(*n.HeartbeatAge * float64(time.Second)))
			}
			fmt.Fprintf(tw, "\t%s\t%s\t%s\t%s\t%s", orDash(n.Group), orDash(n.RequestID), hb, orDash(n.CordonedBy), orDash(strings.Join(n.Conditions, ",")))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// QueueEntry is one row of `queue -o json|yaml`.
type QueueEntry struct {
	Position       int     `json:"position"` // 0: its agent is dead, it will not be granted
	Node           string  `json:"node"`
	Group          string  `json:"group"`
	WaitingSeconds float64 `json:"waitingSeconds"`
	Live           bool    `json:"live"`
	Message        string  `json:"message,omitempty"`
	// PredictedStart and PredictedEnd are when its maintenance is predicted
	// to start and end (kustodian-ctl plan's predictor: each node's
	// history, the queue, the slots and the policy's gates); absent when it
	// cannot be placed. EstimateSource says whose history gave its time:
	// node, policy or default.
	PredictedStart *time.Time `json:"predictedStart,omitempty"`
	PredictedEnd   *time.Time `json:"predictedEnd,omitempty"`
	EstimateSource string     `json:"estimateSource,omitempty"`
	// Later: the predicted times are the earliest it can go (a node before
	// it is overdue).
	Later bool `json:"later,omitempty"`
}

// QueueList is the documented output of `queue -o json|yaml`.
type QueueList struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Items      []QueueEntry `json:"items"`
}

func queueList(s status.MaintenanceStatus) QueueList {
	q := QueueList{APIVersion: status.APIVersion, Kind: "MaintenanceQueue", Items: []QueueEntry{}}
	f := s.Forecast()
	for _, n := range s.Queue() {
		e := QueueEntry{Position: n.QueuePosition, Node: n.Name, Group: n.Group, Live: n.Live, Message: n.Message}
		if n.Requested != nil {
			e.WaitingSeconds = s.Time.Sub(*n.Requested).Round(time.Second).Seconds()
		}
		if fn, ok := f.Nodes[n.Name]; ok && fn.Unplaced == "" && !s.Paused {
			start, end := fn.Entry.Start, fn.Entry.End
			e.PredictedStart, e.PredictedEnd, e.EstimateSource, e.Later = &start, &end, fn.Entry.Estimate.Source, fn.Entry.Later
		}
		q.Items = append(q.Items, e)
	}
	return q
}

// eta is when a queued node's maintenance is predicted to end, from now:
// "in 12m (policy)" when its time is not its own history's, "in 12m+" when
// a node before it is overdue; "-" when it cannot be placed, "paused".
func eta(e QueueEntry, now time.Time, paused bool) string {
	if paused {
		return "paused"
	}
	if e.PredictedEnd == nil {
		return "-"
	}
	d := e.PredictedEnd.Sub(now)
	s := "in " + duration.HumanDuration(max(d, time.Second))
	if e.Later {
		s += "+"
	}
	if e.EstimateSource != predict.SourceNode {
		s += " (" + e.EstimateSource + ")"
	}
	return s
}

func printQueue(w io.Writer, q QueueList, now time.Time, paused, wide, headers bool) {
	tw := newTable(w)
	if headers {
		cols := "POSITION\tNODE\tGROUP\tWAITING\tETA\tLIVE"
		if wide {
			cols += "\tMESSAGE"
		}
		fmt.Fprintln(tw, cols)
	}
	for _, e := range q.Items {
		pos := fmt.Sprint(e.Position)
		if e.Position == 0 {
			pos = "-"
		}
		live := "yes"
		if !e.Live {
			live = "no (agent silent; skipped)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s", pos, e.Node, orDash(e.Group),
			duration.HumanDuration(time.Duration(e.WaitingSeconds)*time.Second), eta(e, now, paused), live)
		if wide {
			fmt.Fprintf(tw, "\t%s", orDash(status.Printable(e.Message)))
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

// nodeNames are what -o name prints for nodes.
func nodeNames(nodes []string) []string {
	out := make([]string, 0, len(nodes))
	seen := map[string]bool{}
	for _, n := range nodes {
		if !seen[n] {
			seen[n] = true
			out = append(out, "node/"+n)
		}
	}
	return out
}
