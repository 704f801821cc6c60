package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/logging"
	"github.com/kustodian/kustodian/internal/status"
)

// status over several clusters: a line per cluster (its locks, pause and
// nodes), then the rows of every cluster's nodes with CLUSTER first; with
// --watch, the fleet view: a line per cluster with its progress.

// readStatuses reads each cluster's status.
func readStatuses(ctx context.Context, ts []clusterTarget) []clusterResult[status.MaintenanceStatus] {
	return eachCluster(ctx, ts, func(ctx context.Context, c *options) (status.MaintenanceStatus, error) {
		r, err := c.reader()
		if err != nil {
			return status.MaintenanceStatus{}, err
		}
		return r.Read(ctx)
	})
}

// statusClusters is status over several clusters.
func (o *options) statusClusters(ctx context.Context, out *output, names []string, all, watch bool) error {
	ts, _, err := o.targets()
	if err != nil {
		return err
	}
	if watch {
		return o.watchClusters(ctx, ts, out)
	}
	rs := readStatuses(ctx, ts)
	if err := allFailed(rs); err != nil {
		return err
	}
	found, counts, unread := map[string]bool{}, map[string]string{}, 0
	for i := range rs {
		if rs[i].err != nil {
			unread++
			continue
		}
		counts[rs[i].context] = nodeCounts(rs[i].value) // of every node, before the selection
		rs[i].value.Nodes = statusRows(names, all)(rs[i].value)
		for _, n := range rs[i].value.Nodes {
			found[n.Name] = true
		}
		if err := sortRows(out, rs[i].value.Nodes); err != nil {
			return err
		}
	}
	for _, n := range names {
		if !found[n] {
			also := ""
			if unread > 0 {
				also = fmt.Sprintf(" (%d could not be read: status without NODE says which)", unread)
			}
			return fmt.Errorf("node %q not found in the clusters read%s: no such Node and no Kustodian record for it", n, also)
		}
	}
	w := o.streams.Out
	if !out.Table() {
		return printClusters(w, out, "MaintenanceStatus", rs, func(s status.MaintenanceStatus) any { return s }, nil, "")
	}
	printClusterHeaders(w, rs, counts, !out.NoHeaders)
	fmt.Fprintln(w)
	return printClusters(w, out, "MaintenanceStatus", withoutErrors(rs), nil, func(w io.Writer, s status.MaintenanceStatus) error {
		if len(s.Nodes) > 0 {
			printNodes(w, s, s.Nodes, out.Wide(), !out.NoHeaders)
		}
		return nil
	}, "No node is in maintenance or waiting for it in these clusters (--all lists every node).")
}

// withoutErrors are the clusters that were read (those that were not are
// said once, elsewhere).
func withoutErrors[T any](rs []clusterResult[T]) []clusterResult[T] {
	var out []clusterResult[T]
	for _, r := range rs {
		if r.err == nil {
			out = append(out, r)
		}
	}
	return out
}

// printClusterHeaders prints a line per cluster: its locks, whether it is
// paused, and how many nodes are where; or why it could not be read.
func printClusterHeaders(w io.Writer, rs []clusterResult[status.MaintenanceStatus], counts map[string]string, headers bool) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	if headers {
		fmt.Fprintln(tw, "CLUSTER\tLOCKS\tPAUSED\tNODES")
	}
	for _, r := range rs {
		if r.err != nil {
			fmt.Fprintf(tw, "%s\t%s\n", r.context, notRead(r.err))
			continue
		}
		s := r.value
		paused := "no"
		if s.Paused {
			paused = "yes: " + orDash(s.PausedReason)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.context, locksLine(s), paused, counts[r.context])
	}
	tw.Flush()
}

// locksLine is a cluster's locks in a few words: "default: n1 (3m)".
func locksLine(s status.MaintenanceStatus) string {
	var held []string
	for _, l := range s.Locks {
		if l.Holder != "" {
			held = append(held, fmt.Sprintf("%s: %s (%s)", l.Group, l.Holder, age(l.Since, s.Time)))
		}
	}
	if len(held) == 0 {
		return "free"
	}
	return strings.Join(held, ", ")
}

// nodeCounts says how many of a cluster's nodes (every node it knows of)
// are in maintenance, waiting, failed and idle.
func nodeCounts(s status.MaintenanceStatus) string {
	var in, waiting, failed, idle int
	for _, n := range s.Nodes {
		switch n.State {
		case lock.Idle:
			idle++
		case lock.Waiting:
			waiting++
		case lock.Failed:
			failed++
		default:
			in++
		}
	}
	return fmt.Sprintf("%d in maintenance, %d waiting, %d failed, %d idle", in, waiting, failed, idle)
}

// fleetEvery is how often the fleet view reads every cluster again.
var fleetEvery = 2 * time.Second

// watchClusters is the fleet view: a line per cluster (done, in
// maintenance, waiting, failed, its ETA), read again every fleetEvery. On
// a terminal the table is redrawn; elsewhere a cluster's line is printed
// when it changes; -o json prints the list on one line at each change.
func (o *options) watchClusters(ctx context.Context, ts []clusterTarget, out *output) error {
	w := o.streams.Out
	redraw := out.Table() && logging.IsTerminal(w)
	since := map[string]time.Time{}
	last := map[string]string{}
	lastKey := ""
	t := time.NewTicker(fleetEvery)
	defer t.Stop()
	for {
		rs := readStatuses(ctx, ts)
		if ctx.Err() != nil {
			return nil
		}
		lines := map[string]string{}
		for _, r := range rs {
			if r.err != nil {
				lines[r.context] = notRead(r.err)
				continue
			}
			if _, ok := since[r.context]; !ok {
				since[r.context] = rolloutStart(r.value)
			}
			lines[r.context] = clusterProgress(r.value, since[r.context])
		}
		switch {
		case !out.Table():
			// A document when something but the time changed.
			key := statusesKey(rs)
			if key == lastKey {
				break
			}
			lastKey = key
			var b strings.Builder
			if err := printClusters(&b, &output{Format: out.Format, Template: out.Template, AllowMissing: out.AllowMissing},
				"MaintenanceStatus", rs, func(s status.MaintenanceStatus) any { return s }, nil, ""); err != nil {
				fmt.Fprintln(o.streams.ErrOut, "warning:", err)
			} else {
				fmt.Fprint(w, compactJSON(b.String(), out.Format))
			}
		case redraw:
			fmt.Fprint(w, "\033[H\033[2J")
			tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
			fmt.Fprintln(tw, "CLUSTER\tPROGRESS")
			for _, r := range rs {
				fmt.Fprintf(tw, "%s\t%s\n", r.context, lines[r.context])
			}
			tw.Flush()
			fmt.Fprintf(w, "\n%s, every %s (Ctrl-C ends)\n", time.Now().Format("15:04:05"), fleetEvery)
		default:
			for _, r := range rs {
				if line := lines[r.context]; line != last[r.context] {
					fmt.Fprintf(w, "%s  %s  %s\n", time.Now().Format("15:04:05"), r.context, line)
				}
			}
		}
		last = lines
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// statusesKey is what the clusters' statuses say, but their time: a lock
// holder, the pause, each node's state, queue place and message, or why a
// cluster could not be read.
func statusesKey(rs []clusterResult[status.MaintenanceStatus]) string {
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "%s|", r.context)
		if r.err != nil {
			b.WriteString(oneLine(r.err) + "\n")
			continue
		}
		s := r.value
		fmt.Fprintf(&b, "%v %s\n", s.Paused, s.PausedReason)
		for _, l := range s.Locks {
			fmt.Fprintf(&b, " lock %s %s\n", l.Name, l.Holder)
		}
		for _, n := range s.Nodes {
			fmt.Fprintf(&b, " %s %s %d %s\n", n.Name, n.State, n.QueuePosition, n.Message)
		}
	}
	return b.String()
}

// clusterProgress is one cluster's line in the fleet view.
func clusterProgress(s status.MaintenanceStatus, since time.Time) string {
	p := s.ProgressSince(since)
	line := fmt.Sprintf("%d/%d done, %d in maintenance, %d waiting, %d failed; %s", p.Done, p.Total(), p.InMaintenance, p.Waiting, p.Failed, etaOf(s, p))
	if s.Paused {
		line += "; paused: " + orDash(s.PausedReason)
	}
	return line
}

// compactJSON puts a JSON document on one line (other formats as they are).
func compactJSON(doc, format string) string {
	var b bytes.Buffer
	if format != outputJSON || json.Compact(&b, []byte(doc)) != nil {
		return doc
	}
	return b.String() + "\n"
}
