package ctl

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/kustodian/kustodian/internal/lock"
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
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := o.client()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				if err := setHold(cmd.Context(), client, args[0], true, reason); err != nil {
					return err
				}
				fmt.Fprintf(o.streams.Out, "node %s held: it stays Waiting and the nodes behind it go ahead, until kustodian-ctl resume %s\n", args[0], args[0])
				return nil
			}
			if err := setPaused(cmd.Context(), client, o.namespace(), true, reason); err != nil {
				return err
			}
			fmt.Fprintf(o.streams.Out, "maintenance paused in namespace %s: nodes in maintenance finish, no other node starts until kustodian-ctl resume\n", o.namespace())
			return nil
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, shown by status and in the waiting nodes' messages")
	return cmd
}

func newResumeCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "resume [NODE]",
		Short: "Grant maintenance again after a pause (with NODE: let a held node go again)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := o.client()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				if err := setHold(cmd.Context(), client, args[0], false, ""); err != nil {
					return err
				}
				fmt.Fprintf(o.streams.Out, "node %s no longer held\n", args[0])
				return nil
			}
			if err := setPaused(cmd.Context(), client, o.namespace(), false, ""); err != nil {
				return err
			}
			fmt.Fprintf(o.streams.Out, "maintenance resumed in namespace %s\n", o.namespace())
			return nil
		},
	}
}

// setHold sets or clears a node's kustodian.io/hold annotation.
func setHold(ctx context.Context, client kubernetes.Interface, node string, hold bool, reason string) error {
	var value any // nil removes it
	if hold {
		value = "true"
		if reason != "" {
			value = reason
		}
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{lock.AnnotationHold: value}}})
	if err != nil {
		return err
	}
	if _, err := client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "kustodian-ctl"}); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("node %s does not exist (kubectl get nodes lists them)", node)
		}
		return status.Explain(err, "patch", "nodes", "")
	}
	return nil
}

// setPaused writes the control ConfigMap, creating it when missing.
func setPaused(ctx context.Context, client kubernetes.Interface, ns string, paused bool, reason string) error {
	if err := (status.Reader{Client: client, Namespace: ns}).CheckInstalled(ctx); err != nil {
		return err
	}
	cms := client.CoreV1().ConfigMaps(ns)
	data := map[string]string{"paused": fmt.Sprint(paused)}
	if reason != "" {
		data["reason"] = reason
	}
	cm, err := cms.Get(ctx, lock.ControlConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: lock.ControlConfigMap, Namespace: ns, Labels: map[string]string{lock.LabelManagedBy: lock.ManagedBy}},
			Data:       data,
		}
		if _, err := cms.Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return status.Explain(err, "create", "configmaps", ns)
		}
		return nil
	}
	if err != nil {
		return status.Explain(err, "get", "configmaps", ns)
	}
	cm.Data = data
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return status.Explain(err, "update", "configmaps", ns)
	}
	return nil
}
