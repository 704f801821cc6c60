package ctl

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kustodian/kustodian/internal/lock/lockapi"
	"github.com/kustodian/kustodian/internal/status"
)

func newPauseCommand(o *options) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "pause [NODE]",
		Short: "Stop granting maintenance: the nodes in maintenance finish, nobody else starts (with NODE: hold that node only)",
		Long: `pause stops new grants in the whole namespace: the nodes in maintenance finish,
no other node starts until kustodian-ctl resume.

pause NODE holds one node instead (the Node annotation kustodian.io/hold): it
stays Waiting with the reason, and the nodes behind it go ahead. resume NODE
lets it go again.`,
		Args: atMostOneArg("NODE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := o.client()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				if err := setHold(cmd.Context(), client, args[0], true, reason, o.dryRun); err != nil {
					return err
				}
				fmt.Fprintf(o.streams.Out, "node %s held: it stays Waiting and the nodes behind it go ahead, until kustodian-ctl resume %s%s\n", args[0], args[0], o.dryRun.suffix())
				return nil
			}
			if err := setPaused(cmd.Context(), client, o.namespace(), true, reason, o.dryRun); err != nil {
				return err
			}
			fmt.Fprintf(o.streams.Out, "maintenance paused in namespace %s: nodes in maintenance finish, no other node starts until kustodian-ctl resume%s\n", o.namespace(), o.dryRun.suffix())
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, shown by status and in the waiting nodes' messages")
	addDryRun(cmd, o, "check, change nothing")
	cmd.ValidArgsFunction = o.completeNodes
	return cmd
}

func newResumeCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "resume [NODE]",
		Short: "Grant maintenance again after a pause (with NODE: let a held node go again)",
		Args:  atMostOneArg("NODE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := o.client()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				if err := setHold(cmd.Context(), client, args[0], false, "", o.dryRun); err != nil {
					return err
				}
				fmt.Fprintf(o.streams.Out, "node %s no longer held%s\n", args[0], o.dryRun.suffix())
				return nil
			}
			if err := setPaused(cmd.Context(), client, o.namespace(), false, "", o.dryRun); err != nil {
				return err
			}
			fmt.Fprintf(o.streams.Out, "maintenance resumed in namespace %s%s\n", o.namespace(), o.dryRun.suffix())
			return nil
		},
	}
	addDryRun(cmd, o, "check, change nothing")
	cmd.ValidArgsFunction = o.completeNodes
	return cmd
}

// setHold sets or clears a node's hold (lockapi.Client.SetHold); a client
// dry run only checks that the node exists.
func setHold(ctx context.Context, client kubernetes.Interface, node string, hold bool, reason string, dry dryRun) error {
	var err error
	if dry == dryRunClient {
		_, err = client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	} else {
		err = (&lockapi.Client{Kube: client}).SetHold(ctx, node, hold, reason)
	}
	if err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("node %s does not exist (kubectl get nodes lists them)", node)
		}
		return status.Explain(err, "patch", "nodes", "")
	}
	return nil
}

// setPaused pauses or resumes the namespace (lockapi.Client.SetPaused).
func setPaused(ctx context.Context, client kubernetes.Interface, ns string, paused bool, reason string, dry dryRun) error {
	if err := (status.Reader{Client: client, Namespace: ns}).CheckInstalled(ctx); err != nil || dry == dryRunClient {
		return err
	}
	if err := (&lockapi.Client{Kube: client, Namespace: ns}).SetPaused(ctx, paused, reason); err != nil {
		return status.Explain(err, "update", "configmaps", ns)
	}
	return nil
}
