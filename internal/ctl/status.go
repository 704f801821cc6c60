package ctl

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/status"
)

func newStatusCommand(o *options) *cobra.Command {
	var all, watch bool
	var out *output
	cmd := &cobra.Command{
		Use:   "status [NODE...]",
		Short: "Show who holds the lock, who waits, and what each node in maintenance does",
		Long: `status prints a header (the lock holder of each group and for how long, whether
maintenance is paused and why, Kured's lock holder when Kured is installed), then
one row per node that is not Idle, or per NODE named. --all includes Idle nodes.
-o wide adds the group, request id, heartbeat age and who cordoned the node.
Naming nodes also shows each waiting node's policy and every gate with its
verdict (open, closed or unchecked), as its agent last saw them: the answer to
"why is my node not going?";
-o json|yaml prints a MaintenanceStatus (apiVersion kustodian.io/v1alpha1), which
jsonpath and custom-columns read too; -o name prints node/NAME per row.
--watch prints every change, and after it the fleet's progress: done, in
maintenance, waiting, failed, time elapsed and the predicted end (a bar on a
terminal).

Over several clusters (--context A,B, --all-contexts, --fleet FILE): a line per
cluster (its locks, pause and node counts, or why it cannot be read), then the
nodes of every cluster with CLUSTER first; -o json|yaml prints a
MaintenanceStatusList, an item per cluster. --watch is then the fleet view: a
line per cluster with its progress and ETA, read again every 2 s.`,
		Example: `  kustodian-ctl status
  kustodian-ctl status -o wide --all
  kustodian-ctl status node-1 -o json
  kustodian-ctl status --watch
  kustodian-ctl status --all-contexts --watch`,
		RunE: func(cmd *cobra.Command, nodes []string) error {
			if err := out.Check(); err != nil {
				return err
			}
			if o.multi() {
				return o.statusClusters(cmd.Context(), out, nodes, all, watch)
			}
			r, err := o.reader()
			if err != nil {
				return err
			}
			return o.show(cmd.Context(), r, watch, true, out, statusPrinter(out, nodes, all), statusRows(nodes, all))
		},
	}
	out = addOutput(cmd, true)
	cmd.Flags().BoolVar(&all, "all", false, "include Idle nodes")
	cmd.Flags().BoolVar(&all, "include-idle", false, "include Idle nodes (as --all)")
	refuseAllNamespaces(cmd)
	cmd.ValidArgsFunction = o.completeNodes
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after the status, print every change as it happens (over several clusters: a line per cluster, read every 2s)")
	return manyClusters(cmd)
}

// statusPrinter prints a status as `status` shows it: the nodes selected,
// in the output format.
func statusPrinter(out *output, nodes []string, all bool) func(io.Writer, status.MaintenanceStatus) error {
	return func(w io.Writer, s status.MaintenanceStatus) error {
		s, err := selectNodes(s, nodes, all)
		if err != nil {
			return err
		}
		if err := sortRows(out, s.Nodes); err != nil {
			return err
		}
		if err := printStatus(w, s, out); err != nil {
			return err
		}
		if len(nodes) > 0 && out.Table() {
			printGates(w, s.Nodes)
		}
		return nil
	}
}

// selectNodes keeps the named nodes, or the nodes that are not Idle (all:
// every node). A named node that Kustodian does not know is an error.
func selectNodes(s status.MaintenanceStatus, names []string, all bool) (status.MaintenanceStatus, error) {
	if len(names) > 0 {
		byName := map[string]status.Node{}
		for _, n := range s.Nodes {
			byName[n.Name] = n
		}
		var out []status.Node
		for _, name := range names {
			n, ok := byName[name]
			if !ok {
				return s, fmt.Errorf("node %q not found: there is no such Node and no Kustodian record for it in namespace %s", name, s.Namespace)
			}
			out = append(out, n)
		}
		s.Nodes = out
		return s, nil
	}
	if !all {
		s.Nodes = statusRows(nil, false)(s)
	}
	return s, nil
}

// statusRows selects the rows a status shows.
func statusRows(names []string, all bool) func(status.MaintenanceStatus) []status.Node {
	return func(s status.MaintenanceStatus) []status.Node {
		want := map[string]bool{}
		for _, n := range names {
			want[n] = true
		}
		out := []status.Node{}
		for _, n := range s.Nodes {
			if (len(names) > 0 && want[n.Name]) || (len(names) == 0 && (all || n.State != lock.Idle)) {
				out = append(out, n)
			}
		}
		return out
	}
}

// printGates shows each node's policy and gates.
func printGates(w io.Writer, nodes []status.Node) {
	for _, n := range nodes {
		fmt.Fprintln(w)
		if n.Silence != "" {
			fmt.Fprintf(w, "Silence of %s in Alertmanager: %s\n", n.Name, n.Silence)
		}
		if n.State != lock.Waiting || len(n.Gates) == 0 {
			fmt.Fprintf(w, "%s is %s: gates are checked while a node is Waiting.\n", n.Name, n.State)
			continue
		}
		fmt.Fprintf(w, "Gates of %s (policy %s, group %s):\n", n.Name, orDash(n.Policy), orDash(n.Group))
		tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "  GATE\tVERDICT\tREASON")
		for _, g := range n.Gates {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", g.Gate, g.Verdict, orDash(g.Reason))
		}
		tw.Flush()
	}
}

func printStatus(w io.Writer, s status.MaintenanceStatus, out *output) error {
	if !out.Table() {
		var names []string
		for _, n := range s.Nodes {
			names = append(names, n.Name)
		}
		return out.Print(w, s, nodeNames(names))
	}
	printHeader(w, s)
	fmt.Fprintln(w)
	if len(s.Nodes) == 0 {
		_, err := fmt.Fprintln(w, "No node is in maintenance or waiting for it (--all lists every node).")
		return err
	}
	printNodes(w, s, s.Nodes, out.Wide(), !out.NoHeaders)
	return nil
}
