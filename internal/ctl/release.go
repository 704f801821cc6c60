package ctl

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/kustodian/kustodian/internal/lock/lockapi"
	"github.com/kustodian/kustodian/internal/nodemarks"
	"github.com/kustodian/kustodian/internal/status"
)

func newReleaseCommand(o *options) *cobra.Command {
	var uncordon bool
	cmd := &cobra.Command{
		Use:   "release NODE",
		Short: "Break the lock of a node whose maintenance failed, so the rollout can go on",
		Long: `release frees the locks NODE holds, so that the next node in the queue can
proceed. NODE stays cordoned unless --uncordon is given. Its agent records Failed
("lock released by an admin") and does not take the lock again for the same
request: removing the request file (after repairing the node) returns the node to
Idle, and a new request starts over.`,
		Example: `  kustodian-ctl release node-3
  kustodian-ctl release node-3 --uncordon`,
		Args: oneArg("NODE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := o.client()
			if err != nil {
				return err
			}
			return release(cmd.Context(), o, client, args[0], uncordon)
		},
	}
	cmd.Flags().BoolVar(&uncordon, "uncordon", false, "also make the node schedulable again")
	addDryRun(cmd, o, "say what would be released, change nothing")
	cmd.ValidArgsFunction = o.completeNodes
	return cmd
}

func release(ctx context.Context, o *options, client kubernetes.Interface, node string, uncordon bool) error {
	ns := o.namespace()
	s, err := (status.Reader{Client: client, Namespace: ns, KuredNamespace: o.kuredNamespace, KuredDaemonSet: o.kuredDaemonSet, KuredKeys: o.kuredKeys}).Read(ctx)
	if err != nil {
		return err
	}
	var held []status.Lock
	for _, l := range s.Locks {
		if l.Holder == node {
			held = append(held, l)
		}
	}
	var current *status.Node
	for i := range s.Nodes {
		if s.Nodes[i].Name == node {
			current = &s.Nodes[i]
		}
	}
	if current == nil {
		return fmt.Errorf("node %q not found: there is no such Node and no Kustodian record for it in namespace %s", node, ns)
	}
	if len(held) == 0 {
		return fmt.Errorf("node %s holds no lock in namespace %s (it is %s); nothing to release", node, ns, current.State)
	}
	out, dry := o.streams.Out, o.dryRun.suffix()
	since := map[string]*time.Time{}
	var released []string
	for _, l := range held {
		since[l.Name] = l.Since
		released = append(released, l.Name)
	}
	if o.dryRun != dryRunClient {
		released, err = (&lockapi.Client{Kube: client, Namespace: ns}).ReleaseByAdmin(ctx, node, "kustodian-ctl", status.DefaultStaleAfter)
		if err != nil {
			return status.Explain(err, "update", "leases.coordination.k8s.io", ns)
		}
	}
	for _, name := range released {
		fmt.Fprintf(out, "released %s, held by %s for %s%s\n", name, node, age(since[name], time.Now()), dry)
	}
	if uncordon {
		if o.dryRun != dryRunClient {
			if err := nodemarks.UncordonByAdmin(ctx, client, node); err != nil {
				return status.Explain(err, "patch", "nodes", "")
			}
		}
		fmt.Fprintf(out, "uncordoned %s%s\n", node, dry)
	} else if current.CordonedBy != "" {
		fmt.Fprintf(out, "%s stays cordoned: repair it, then remove its request file (its agent uncordons it), or run kubectl uncordon %s\n", node, node)
	}
	if dry != "" {
		fmt.Fprintf(out, "nothing was changed%s\n", dry)
		return nil
	}
	fmt.Fprintf(out, "the agent on %s records Failed and will not take the lock again for this request; the next node in the queue may proceed\n", node)
	return nil
}
