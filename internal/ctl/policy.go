package ctl

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kustodian/kustodian/internal/status"
)

func newPolicyCommand(o *options) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:   "policy [NAME...]",
		Short: "List the MaintenancePolicies with their nodes, groups, slots in use and next window",
		Long: `policy lists the MaintenancePolicies of the namespace as the agents apply them:
how many nodes follow each (the built-in policy "default" for nodes no policy
selects), its groups with their slots in use and holders, and whether its window
is open now or when it opens next. Nodes a policy cannot be applied to (a tie of
precedence, a missing groupBy label) are listed with the reason. NAMEs list only
those policies.`,
		Example: `  kustodian-ctl policy
  kustodian-ctl policy -o yaml`,
		ValidArgsFunction: o.completePolicies,
		RunE: func(cmd *cobra.Command, names []string) error {
			if err := out.Check(); err != nil {
				return err
			}
			list, err := readPolicies(cmd.Context(), o)
			if err != nil {
				return err
			}
			if list.Items, err = namedPolicies(list.Items, names, o.namespace()); err != nil {
				return err
			}
			if err := sortRows(out, list.Items); err != nil {
				return err
			}
			if !out.Table() {
				var names []string
				for _, p := range list.Items {
					names = append(names, "maintenancepolicy.kustodian.io/"+p.Name)
				}
				return out.Print(o.streams.Out, list, names)
			}
			printPolicies(o.streams.Out, list, !out.NoHeaders)
			return nil
		},
	}
	out = addOutput(cmd, false)
	return cmd
}

// namedPolicies keeps the policies named, in the order named; all without
// names.
func namedPolicies(items []status.PolicyStatus, names []string, ns string) ([]status.PolicyStatus, error) {
	if len(names) == 0 {
		return items, nil
	}
	var out []status.PolicyStatus
	for _, name := range names {
		i := slices.IndexFunc(items, func(p status.PolicyStatus) bool { return p.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("maintenancepolicy %q not found in namespace %s (kustodian-ctl policy lists them)", name, ns)
		}
		out = append(out, items[i])
	}
	return out, nil
}

func readPolicies(ctx context.Context, o *options) (status.PolicyList, error) {
	r, err := o.reader()
	if err != nil {
		return status.PolicyList{}, err
	}
	in, err := r.Inputs(ctx)
	if err != nil {
		return status.PolicyList{}, err
	}
	if in.PoliciesErr != nil {
		return status.PolicyList{}, in.PoliciesErr
	}
	return status.Policies(in.Policies, in.Nodes, in.Leases, in.Now), nil
}

func printPolicies(w io.Writer, list status.PolicyList, headers bool) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	if headers {
		fmt.Fprintln(tw, "POLICY\tPRECEDENCE\tNODES\tGROUPS (nodes, slots in use)\tWINDOW")
	}
	for _, p := range list.Items {
		var groups []string
		for _, g := range p.Groups {
			s := fmt.Sprintf("%s (%d, %d/%d", g.Name, g.Nodes, g.InUse, g.Slots)
			if len(g.Holder) > 0 {
				s += ": " + strings.Join(g.Holder, ", ")
			}
			groups = append(groups, s+")")
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\n", p.Name, p.Precedence, p.Nodes, orDash(strings.Join(groups, ", ")), p.Window)
	}
	tw.Flush()
	for _, p := range list.Items {
		for _, e := range p.Errors {
			fmt.Fprintf(w, "held by policy %s: %s\n", p.Name, e)
		}
	}
}
