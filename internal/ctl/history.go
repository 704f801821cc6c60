package ctl

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kustodian/kustodian/internal/history"
	"github.com/kustodian/kustodian/internal/status"
)

// MaintenanceHistory is what `history -o json|yaml` prints.
type MaintenanceHistory struct {
	APIVersion string        `json:"apiVersion"`
	Kind       string        `json:"kind"`
	Items      []HistoryItem `json:"items"`
}

// HistoryItem is one past maintenance of a node, with its durations in
// seconds (0 when a step did not happen).
type HistoryItem struct {
	Node string `json:"node"`
	history.Entry
	WaitSeconds        int64 `json:"waitSeconds"`
	DrainSeconds       int64 `json:"drainSeconds"`
	MaintenanceSeconds int64 `json:"maintenanceSeconds"`
}

func newHistoryCommand(o *options) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:   "history [NODE...]",
		Short: "List past maintenances per node: when, how long each step took, result and reason",
		Long: fmt.Sprintf(`history lists the maintenances that ended on each node, or on each NODE named,
oldest first: when it was requested, how long it waited for the lock, drained and
was in maintenance, its result (succeeded or failed, with why) and its reason.

Each node's agent keeps them in its Node's annotation %s when a maintenance
ends: the last %d per node, at most %d bytes (the oldest go first). They survive
agent restarts and reboots, and go with the Node. The maintenance under way is
in status.
-o wide adds the policy, the group and why a maintenance failed;
-o json|yaml prints a MaintenanceHistory (apiVersion kustodian.io/v1alpha1), which
jsonpath and custom-columns read too; -o name prints node/NAME.`, history.Annotation, history.MaxEntries, history.MaxBytes),
		Example: `  kustodian-ctl history
  kustodian-ctl history node-3 -o wide
  kustodian-ctl history -o json`,
		RunE: func(cmd *cobra.Command, nodes []string) error {
			if err := out.Check(); err != nil {
				return err
			}
			if o.multi() {
				return o.historyClusters(cmd.Context(), out, nodes)
			}
			client, err := o.client()
			if err != nil {
				return err
			}
			h, err := readHistory(cmd.Context(), client, nodes, o.streams.ErrOut)
			if err != nil {
				return err
			}
			if out.Picture() {
				return out.Draw(o.streams.Out, historyChart(h, time.Now()))
			}
			if printed, err := printList(out, o.streams.Out, h, h.Items, func(it HistoryItem) string { return it.Node }); printed {
				return err
			}
			return printHistory(o.streams.Out, h, out.Wide(), !out.NoHeaders)
		},
	}
	out = addOutput(cmd, true)
	addPictures(cmd, out)
	cmd.ValidArgsFunction = o.completeNodes
	return manyClusters(cmd)
}

// historyClusters is history over several clusters: each cluster's, with
// CLUSTER first. A NODE named is looked for in every cluster.
func (o *options) historyClusters(ctx context.Context, out *output, names []string) error {
	ts, _, err := o.targets()
	if err != nil {
		return err
	}
	rs := eachCluster(ctx, ts, func(ctx context.Context, c *options) (MaintenanceHistory, error) {
		client, err := c.client()
		if err != nil {
			return MaintenanceHistory{}, err
		}
		h, err := readHistory(ctx, client, nil, c.streams.ErrOut)
		if err != nil {
			return h, err
		}
		if len(names) > 0 {
			h.Items = slices.DeleteFunc(h.Items, func(it HistoryItem) bool { return !slices.Contains(names, it.Node) })
		}
		return h, sortRows(out, h.Items)
	})
	return printClusters(o.streams.Out, out, "MaintenanceHistory", rs, func(h MaintenanceHistory) any { return h },
		func(w io.Writer, h MaintenanceHistory) error {
			if len(h.Items) == 0 {
				return nil
			}
			return printHistory(w, h, out.Wide(), !out.NoHeaders)
		}, "No maintenance has ended on these nodes yet.")
}

// readHistory reads the history of the nodes named, or of every node. A
// history that does not parse is said on warn and skipped.
func readHistory(ctx context.Context, client kubernetes.Interface, names []string, warn io.Writer) (MaintenanceHistory, error) {
	var nodes []corev1.Node
	if len(names) == 0 {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return MaintenanceHistory{}, status.Explain(err, "list", "nodes", "")
		}
		nodes = list.Items
	}
	for _, name := range names {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return MaintenanceHistory{}, fmt.Errorf("node %q not found", name)
		}
		if err != nil {
			return MaintenanceHistory{}, status.Explain(err, "get", "nodes", "")
		}
		nodes = append(nodes, *n)
	}
	out := MaintenanceHistory{APIVersion: status.APIVersion, Kind: "MaintenanceHistory", Items: []HistoryItem{}}
	for _, n := range nodes {
		entries, err := history.Parse(n.Annotations[history.Annotation])
		if err != nil {
			fmt.Fprintf(warn, "warning: node %s: %v; skipped\n", n.Name, err)
			continue
		}
		for _, e := range entries {
			out.Items = append(out.Items, HistoryItem{Node: n.Name, Entry: e,
				WaitSeconds: seconds(e.Wait()), DrainSeconds: seconds(e.Drain()), MaintenanceSeconds: seconds(e.Maintenance())})
		}
	}
	sort.SliceStable(out.Items, func(i, j int) bool {
		a, b := out.Items[i], out.Items[j]
		if a.Node != b.Node {
			return a.Node < b.Node
		}
		return a.Requested.Before(b.Requested)
	})
	return out, nil
}

func seconds(d time.Duration) int64 { return int64(d.Round(time.Second) / time.Second) }

func printHistory(w io.Writer, h MaintenanceHistory, wide, headers bool) error {
	if len(h.Items) == 0 {
		_, err := fmt.Fprintln(w, "No maintenance has ended on these nodes yet.")
		return err
	}
	tw := newTable(w)
	header := "NODE\tREQUESTED\tRESULT\tWAIT\tDRAIN\tMAINTENANCE\tREASON"
	if wide {
		header += "\tPOLICY\tGROUP\tMESSAGE"
	}
	if headers {
		fmt.Fprintln(tw, header)
	}
	for _, it := range h.Items {
		row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s", it.Node, it.Requested.UTC().Format(time.RFC3339), it.Result,
			span(it.Wait()), span(it.Drain()), span(it.Maintenance()), orDash(status.Printable(it.Reason)))
		if wide {
			row += fmt.Sprintf("\t%s\t%s\t%s", orDash(it.Policy), orDash(it.Group), orDash(status.Printable(it.Message)))
		}
		fmt.Fprintln(tw, row)
	}
	return tw.Flush()
}

// span is a duration as a table shows it: "-" when the step did not
// happen, milliseconds below a second, then whole seconds.
func span(d time.Duration) string {
	switch {
	case d <= 0:
		return "-"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}
