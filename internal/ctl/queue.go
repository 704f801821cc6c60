package ctl

import (
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
			r, err := o.reader()
			if err != nil {
				return err
			}
			return o.show(cmd.Context(), r, watch, false, out, queuePrinter(out), status.MaintenanceStatus.Queue)
		},
	}
	out = addOutput(cmd, true)
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after the queue, print every change as it happens")
	return cmd
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
