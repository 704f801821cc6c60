package ctl

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/kustodian/kustodian/internal/status"
)

func newQueueCommand(o *options) *cobra.Command {
	var output string
	var watch bool
	cmd := &cobra.Command{
		Use:   "queue",
		Short: "List the nodes waiting for maintenance, in the order they will be granted",
		Long: `queue lists the waiting nodes in grant order: position, node, group, time waiting,
and whether the node's agent is alive. A node whose agent has gone silent keeps
its record but is skipped (no position) until it returns.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			r, err := o.reader()
			if err != nil {
				return err
			}
			return o.show(cmd.Context(), r, watch, output, queuePrinter(output), status.MaintenanceStatus.Queue)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: wide, json or yaml")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after the queue, print every change as it happens")
	return cmd
}

// queuePrinter prints the queue of a status in the output format.
func queuePrinter(output string) func(io.Writer, status.MaintenanceStatus) error {
	return func(w io.Writer, s status.MaintenanceStatus) error {
		q := queueList(s)
		if output == outputJSON || output == outputYAML {
			return printObject(w, output, q)
		}
		if len(q.Items) == 0 {
			_, err := fmt.Fprintln(w, "No node is waiting.")
			return err
		}
		printQueue(w, q)
		return nil
	}
}
