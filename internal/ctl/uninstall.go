package ctl

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/kustodian/kustodian/internal/manifests"
	"github.com/kustodian/kustodian/internal/status"
)

func newUninstallCommand(o *options) *cobra.Command {
	var force bool
	var kuredNS, kuredDS string
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove what install put into the cluster (refused while a node holds a lock, unless --force)",
		Long: `uninstall deletes the RBAC, the ServiceAccount (every node's token stops working)
and the namespace with its Leases and control ConfigMap. While a node holds a lock
it refuses: that node is in maintenance, cordoned, and would be left so. --force
removes everything anyway.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			r, err := o.reader()
			if err != nil {
				return err
			}
			s, err := r.Read(ctx)
			if err != nil {
				return err
			}
			for _, l := range s.Locks {
				if l.Holder != "" && !force {
					return fmt.Errorf("%s holds %s: it is in maintenance; finish or release it first (kustodian-ctl release %s), or pass --force", l.Holder, l.Name, l.Holder)
				}
			}
			dyn, err := o.dynamicClient()
			if err != nil {
				return err
			}
			objs := manifests.Objects(manifests.Options{Namespace: o.namespace(), KuredNamespace: kuredNS, KuredDaemonSet: kuredDS})
			// Bindings and roles first, the namespace (with the Leases) last.
			for i := len(objs) - 1; i >= 0; i-- {
				what, err := remove(ctx, dyn, objs[i])
				if err != nil {
					return err
				}
				fmt.Fprintln(o.streams.Out, what)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "uninstall even while a node holds a lock")
	cmd.Flags().StringVar(&kuredNS, "kured-namespace", "kube-system", "namespace of Kured's DaemonSet, as given to install")
	cmd.Flags().StringVar(&kuredDS, "kured-daemonset", "kured", "name of Kured's DaemonSet, as given to install")
	return cmd
}

func remove(ctx context.Context, dyn dynamic.Interface, obj manifests.Object) (string, error) {
	ri, m, name, err := target(dyn, obj)
	if err != nil {
		return "", err
	}
	err = ri.Delete(ctx, m.GetName(), metav1.DeleteOptions{})
	switch {
	case err == nil:
		return name + " deleted", nil
	case apierrors.IsNotFound(err):
		return name + " not found", nil
	default:
		return "", status.Explain(err, "delete", obj.Resource.Resource, m.GetNamespace())
	}
}
