package ctl

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kustodian/kustodian/internal/manifests"
	"github.com/kustodian/kustodian/internal/policy"
	"github.com/kustodian/kustodian/internal/request"
	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/kustodian/kustodian/internal/status"
)

func newUninstallCommand(o *options) *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove what install put into the cluster (refused while a node holds a lock, unless --force)",
		Long: `uninstall deletes the RBAC, the ServiceAccount (every node's token stops working)
and the namespace with its Leases and control ConfigMap. While a node holds a lock
it refuses: that node is in maintenance, cordoned, and would be left so. --force
removes everything anyway. The MaintenancePolicy, MaintenanceRollout and
MaintenanceRequest CustomResourceDefinitions are shared by every installation:
each is kept while another installation is in the cluster (its agents read
them), and otherwise deleted only when no other namespace has objects of it
(MaintenancePolicies, MaintenanceRollouts) or, for the third, when no
MaintenanceRequest exists (they are cluster-wide).`,
		Args: noArgs,
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
			objs := manifests.Objects(manifests.Options{Namespace: o.namespace(), KuredNamespace: o.kuredNamespace, KuredDaemonSet: o.kuredDaemonSet, KuredLockAnnotations: o.kuredKeys})
			// Bindings and roles first, the namespace (with the Leases) last.
			for i := len(objs) - 1; i >= 0; i-- {
				if objs[i].Resource == manifests.GVRCustomResourceDefinition {
					// Shared by every installation: it goes with the last.
					crd := objs[i].Object.(metav1.Object).GetName()
					kind, gvr, ns := "MaintenancePolicies", policy.GVR, o.namespace()
					switch crd {
					case manifests.RolloutCRDName:
						kind, gvr = "MaintenanceRollouts", rollout.GVR
					case manifests.RequestCRDName:
						kind, gvr, ns = "MaintenanceRequests", request.GVR, "-" // cluster-wide: any one keeps it
					}
					// Other installations' agents read it too (a policy, a
					// rollout, a request may come there any time).
					if others, err := otherInstallations(ctx, dyn, o.namespace()); err != nil {
						return err
					} else if len(others) > 0 {
						fmt.Fprintf(o.streams.Out, "customresourcedefinitions %s kept: installations in %s use it\n", crd, strings.Join(others, ", "))
						continue
					}
					if others, err := objectsElsewhere(ctx, dyn, gvr, ns); err != nil {
						return err
					} else if len(others) > 0 {
						fmt.Fprintf(o.streams.Out, "customresourcedefinitions %s kept: %s exist in %s\n", crd, kind, strings.Join(others, ", "))
						continue
					}
				}
				what, err := remove(ctx, dyn, objs[i], o.dryRun == dryRunClient)
				if err != nil {
					return err
				}
				fmt.Fprintln(o.streams.Out, what+o.dryRun.suffix())
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "uninstall even while a node holds a lock")
	addDryRun(cmd, o, "say what would be deleted, delete nothing")
	return cmd
}

// otherInstallations lists the namespaces of the other installations in
// the cluster, as their admission policies name them.
func otherInstallations(ctx context.Context, dyn dynamic.Interface, ns string) ([]string, error) {
	list, err := dyn.Resource(manifests.GVRValidatingAdmissionPolicy).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=kustodian"})
	if err != nil {
		return nil, status.Explain(err, "list", manifests.GVRValidatingAdmissionPolicy.Resource, "")
	}
	var out []string
	for _, p := range list.Items {
		rest, prefixed := strings.CutPrefix(p.GetName(), manifests.AgentServiceAccount+"-")
		other, suffixed := strings.CutSuffix(rest, "-requests")
		if prefixed && suffixed && other != ns {
			out = append(out, other)
		}
	}
	sort.Strings(out)
	return out, nil
}

// objectsElsewhere lists the other namespaces that hold objects of a
// shared CRD (MaintenancePolicies, MaintenanceRollouts).
func objectsElsewhere(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns string) ([]string, error) {
	list, err := dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, status.Explain(err, "list", gvr.Resource, "")
	}
	seen := map[string]bool{}
	var out []string
	for _, p := range list.Items {
		where := p.GetNamespace()
		if where == "" {
			where = "the cluster" // a cluster-wide object
		}
		if where != ns && !seen[where] {
			seen[where] = true
			out = append(out, where)
		}
	}
	sort.Strings(out)
	return out, nil
}

// remove deletes one object and says so; with look, it only looks whether
// the object is there (a client dry run).
func remove(ctx context.Context, dyn dynamic.Interface, obj manifests.Object, look bool) (string, error) {
	ri, m, name, err := target(dyn, obj)
	if err != nil {
		return "", err
	}
	if look {
		_, err = ri.Get(ctx, m.GetName(), metav1.GetOptions{})
	} else {
		err = ri.Delete(ctx, m.GetName(), metav1.DeleteOptions{})
	}
	switch {
	case err == nil:
		return name + " deleted", nil
	case apierrors.IsNotFound(err):
		return name + " not found", nil
	default:
		return "", status.Explain(err, "delete", obj.Resource.Resource, m.GetNamespace())
	}
}
