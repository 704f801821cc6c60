package ctl

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kustodian/kustodian/internal/status"
)

func newQueueCommand(o *options) *cobra.Command {
	var watch bool
	var out *output
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "List the nodes waiting for maintenance, in the order they will be granted",
		Long: `queue lists the waiting nodes in grant order: position, node, group, time waiting,
ETA (when its maintenance is predicted to end, as kustodian-ctl plan predicts it
from the nodes' history) and whether the node's agent is alive. A node whose agent has gone silent, or
whose own gate is closed (held, blocking pods, its gate command), keeps its
record but is passed (no position, listed last) until it returns or its gate
opens: the order is the one the agents grant in. -o wide adds what each
node's record says; -o json|yaml prints a MaintenanceQueue, which jsonpath
and custom-columns read too; -o name prints node/NAME in grant order.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := out.Check(); err != nil {
				return err
			}
			if o.multi() {
				return o.queueClusters(cmd.Context(), out, watch)
			}
			r, err := o.reader()
			if err != nil {
				return err
			}
			return o.show(cmd.Context(), r, watch, false, out, queuePrinter(out), status.MaintenanceStatus.Queue)
		},
	}
	out = addOutput(cmd, true)
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after the queue, print every change as it happens")
	return manyClusters(cmd)
}

// queueClusters is queue over several clusters: every cluster's queue, with
// CLUSTER first.
func (o *options) queueClusters(ctx context.Context, out *output, watch bool) error {
	if watch {
		return fmt.Errorf("queue --watch follows one cluster; over several, status --watch shows a line per cluster")
	}
	ts, _, err := o.targets()
	if err != nil {
		return err
	}
	rs := readStatuses(ctx, ts)
	queues := func(s status.MaintenanceStatus) QueueList {
		q := queueList(s)
		_ = sortRows(out, q.Items) // --sort-by was checked
		return q
	}
	return printClusters(o.streams.Out, out, "MaintenanceQueue", rs, func(s status.MaintenanceStatus) any { return queues(s) },
		func(w io.Writer, s status.MaintenanceStatus) error {
			if q := queues(s); len(q.Items) > 0 {
				printQueue(w, q, s.Time, s.Paused, out.Wide(), !out.NoHeaders)
			}
			return nil
		}, "No node is waiting in these clusters.")
}

// queuePrinter prints the queue of a status in the output format.
func queuePrinter(out *output) func(io.Writer, status.MaintenanceStatus) error {
	return func(w io.Writer, s status.MaintenanceStatus) error {
		q := queueList(s)
		if printed, err := printList(out, w, q, q.Items, func(e QueueEntry) string { return e.Node }); printed {
			return err
		}
		if len(q.Items) == 0 {
			_, err := fmt.Fprintln(w, "No node is waiting.")
			return err
		}
		printQueue(w, q, s.Time, s.Paused, out.Wide(), !out.NoHeaders)
		return nil
	}
}
