package ctl

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kustodian/kustodian/internal/identity"
	"github.com/kustodian/kustodian/internal/request"
	"github.com/kustodian/kustodian/internal/status"
)

func newRequestCommand(o *options) *cobra.Command {
	var reason string
	var hold time.Duration
	cmd := &cobra.Command{
		Use:   "request NODE... --reason TEXT [--for DURATION]",
		Short: "Ask for a maintenance of nodes from the cluster: each goes through its queue, is drained and held until done",
		Long: `request makes a MaintenanceRequest for each NODE (kustodian.io/v1alpha1,
cluster-scoped): the node's agent takes it as it takes a request from a
maintenance script on the host, through the same queue, policy and drain, and
holds the node (cordoned, drained, the lock kept) until kustodian-ctl done NODE,
or, with --for, until that long after its maintenance began. Who asked (as the
API server knows the caller) goes in the annotation kustodian.io/requested-by and
the node's Events; the API server does not check it, so whoever may create
MaintenanceRequests may write another name there.

The agent takes a request while it runs: with rollouts or clusterRequests
enabled in its configuration it runs from boot (docs/agent.md). kubectl get
maintenancerequests shows each request's phase (Waiting, Draining,
InMaintenance, Completed, Failed).`,
		Example: `  kustodian-ctl request node-1 --reason "disk swap, ticket 4711"
  kustodian-ctl request node-2 node-3 --reason "firmware" --for 2h
  kustodian-ctl done node-1`,
		Args: atLeastOneNode,
		RunE: func(cmd *cobra.Command, args []string) error {
			if reason == "" {
				return fmt.Errorf("request needs --reason TEXT: it is what the node's history, Events and status show")
			}
			until := request.UntilDone
			if cmd.Flags().Changed("for") {
				if hold <= 0 {
					return fmt.Errorf("--for %s: give a positive duration, such as 90m or 2h (without --for: until kustodian-ctl done)", hold)
				}
				until = hold.String()
			}
			client, err := o.client()
			if err != nil {
				return err
			}
			dyn, err := o.dynamicClient()
			if err != nil {
				return err
			}
			who, err := identity.Review(cmd.Context(), client)
			if err != nil {
				return err
			}
			for _, node := range args {
				name, err := createRequest(cmd.Context(), client, dyn, node, reason, until, who.Name, o.dryRun)
				if err != nil {
					return err
				}
				how := "until kustodian-ctl done " + node
				if until != request.UntilDone {
					how = "for " + until + " once drained"
				}
				fmt.Fprintf(o.streams.Out, "maintenance of node %s requested (maintenancerequest/%s), %s%s\n", node, name, how, o.dryRun.suffix())
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why (required): the node's history, Events and status show it")
	cmd.Flags().DurationVar(&hold, "for", 0, "give the node back this long after its maintenance began (default: until kustodian-ctl done)")
	addDryRun(cmd, o, "check, create nothing")
	cmd.ValidArgsFunction = o.completeNodes
	return cmd
}

func newDoneCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "done NODE...",
		Short: "End the maintenances asked with kustodian-ctl request: each node is given back",
		Long: `done deletes every MaintenanceRequest for each NODE: its agent gives the node
back (uncordons it and releases its lock) as it does when a maintenance script
removes its request, or, when the node was still waiting, takes it out of the
queue.`,
		Example: `  kustodian-ctl done node-1`,
		Args:    atLeastOneNode,
		RunE: func(cmd *cobra.Command, args []string) error {
			dyn, err := o.dynamicClient()
			if err != nil {
				return err
			}
			for _, node := range args {
				names, err := deleteRequests(cmd.Context(), dyn, node, o.dryRun)
				if err != nil {
					return err
				}
				for _, name := range names {
					fmt.Fprintf(o.streams.Out, "maintenance of node %s done: maintenancerequest/%s deleted%s\n", node, name, o.dryRun.suffix())
				}
			}
			return nil
		},
	}
	addDryRun(cmd, o, "check, delete nothing")
	cmd.ValidArgsFunction = o.completeNodes
	return cmd
}

// atLeastOneNode accepts one NODE or more.
func atLeastOneNode(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%s needs NODE: %s", cmd.CommandPath(), usageLine(cmd))
	}
	return nil
}

// createRequest makes node's MaintenanceRequest (a client dry run checks
// the Node and sends nothing) and says its name.
func createRequest(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, node, reason, until, by string, dry dryRun) (string, error) {
	if _, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		return "", fmt.Errorf("node %q not found: a maintenance can be asked only of an existing Node", node)
	} else if err != nil {
		return "", status.Explain(err, "get", "nodes", "")
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": request.Group + "/" + request.Version, "kind": request.Kind,
		"metadata": map[string]any{"generateName": node + "-", "annotations": map[string]any{request.AnnotationRequestedBy: by}},
		"spec":     map[string]any{"nodeName": node, "reason": reason, "until": until},
	}}
	if dry == dryRunClient {
		return node + "-<generated>", nil
	}
	c, err := dyn.Resource(request.GVR).Create(ctx, u, metav1.CreateOptions{})
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("the cluster does not serve MaintenanceRequests: run kustodian-ctl install (of this version)")
	}
	if err != nil {
		return "", status.Explain(err, "create", request.Resource, "")
	}
	return c.GetName(), nil
}

// deleteRequests deletes node's MaintenanceRequests and says their names;
// none is an error.
func deleteRequests(ctx context.Context, dyn dynamic.Interface, node string, dry dryRun) ([]string, error) {
	list, err := dyn.Resource(request.GVR).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String()})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("the cluster does not serve MaintenanceRequests: run kustodian-ctl install (of this version)")
	}
	if err != nil {
		return nil, status.Explain(err, "list", request.Resource, "")
	}
	if len(list.Items) == 0 {
		return nil, fmt.Errorf("no MaintenanceRequest for node %s: kustodian-ctl status says what it is doing", node)
	}
	var names []string
	for _, it := range list.Items {
		if dry != dryRunClient {
			uid := it.GetUID()
			err := dyn.Resource(request.GVR).Delete(ctx, it.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
			if err != nil && !apierrors.IsNotFound(err) {
				return names, status.Explain(err, "delete", request.Resource, "")
			}
		}
		names = append(names, it.GetName())
	}
	return names, nil
}
