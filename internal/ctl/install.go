package ctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/manifests"
	"github.com/kustodian/kustodian/internal/nodemarks"
	"github.com/kustodian/kustodian/internal/status"
)

func newInstallCommand(o *options) *cobra.Command {
	var output string
	var kubeletEvictions bool
	var maxLeases int
	var audiences []string
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Install Kustodian's namespace, ServiceAccount, RBAC and admission policies into the cluster",
		Long: `install applies (server-side apply, field manager kustodian-ctl) the
MaintenancePolicy, MaintenanceRollout and MaintenanceRequest CustomResourceDefinitions (and waits until
each is served), the namespace,
the ServiceAccount kustodian-agent whose Node-bound tokens the agents use, the
RBAC the protocol needs and nothing more, ValidatingAdmissionPolicies that
keep each node's token to its own Node, its own record and the locks it holds
(docs/security.md), a ResourceQuota on the namespace's Leases (--max-leases), and
an API Priority and Fairness FlowSchema and PriorityLevelConfiguration that give
the agents together a bounded share of the API server; with --kubelet-evictions
the ServiceAccount may evict no pod at all (each agent evicts with its kubelet's
identity, held by the API server to its own node's pods; install first says which
nodes are ready for it, as their agents labelled them: kustodian.io/kubelet-evictions). It creates the control ConfigMap when it is missing (an
existing pause is kept). It reports what it created or changed. The policies go in
before the rights they narrow, and install returns only once the API server
enforces them: each must refuse a dry run of a request it exists to refuse, made
with the agents' own ServiceAccount (a token bound to no Node, and one bound to the
first Node listed), within a minute. An API server older than Kubernetes 1.34,
or one that does not serve ValidatingAdmissionPolicy, is refused before anything
is applied. --dry-run=client or -o yaml prints the manifests instead; --dry-run=server
sends every apply as a dry run (the API server validates and admits each, and
keeps nothing) and says what each would do.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mo := manifests.Options{Namespace: o.namespace(), KuredNamespace: o.kuredNamespace, KuredDaemonSet: o.kuredDaemonSet, KuredLockAnnotations: o.kuredKeys, MaxLeases: maxLeases, KubeletEvictions: kubeletEvictions,
				TokenAudiences: audiences}
			if maxLeases == 0 {
				return fmt.Errorf("--max-leases 0 would let no node write its record; give a number, or -1 for no quota")
			}
			objs := manifests.Objects(mo)
			if o.dryRun == dryRunClient || output == "yaml" {
				return printManifests(o.streams.Out, objs)
			}
			if output != "" {
				return fmt.Errorf("install prints only -o yaml")
			}
			dyn, err := o.dynamicClient()
			if err != nil {
				return err
			}
			client, rc, err := o.admissionClients()
			if err != nil {
				return err
			}
			if len(mo.TokenAudiences) == 0 {
				if mo.TokenAudiences, err = apiAudiences(cmd.Context(), client); err != nil {
					return fmt.Errorf("%v: give the API server's audiences with --token-audiences A[,B] (the aud claim of this cluster's ServiceAccount tokens)", err)
				}
			}
			objs = manifests.Objects(mo)
			if kubeletEvictions {
				if err := reportKubeletEvictions(cmd.Context(), o.streams.Out, client); err != nil {
					return err
				}
			}
			server := o.dryRun == dryRunServer
			var later []manifests.Object // the tokens' right: after the proof
			for _, obj := range objs {
				if manifests.TokenRight(obj) && !server {
					later = append(later, obj)
					continue
				}
				if server {
					// A dry run creates no namespace, so what goes in one
					// that does not exist yet cannot be checked.
					if ns := objectNamespace(obj); ns != "" {
						if missing, err := namespaceMissing(cmd.Context(), client, ns); err != nil {
							return err
						} else if missing {
							fmt.Fprintf(o.streams.Out, "%s in %s not checked (server dry run): namespace %s does not exist yet\n", obj.Resource.Resource, ns, ns)
							continue
						}
					}
				}
				what, err := apply(cmd.Context(), dyn, obj, server)
				if err != nil {
					return err
				}
				fmt.Fprintln(o.streams.Out, what+o.dryRun.suffix())
				if obj.Resource == manifests.GVRCustomResourceDefinition && !server {
					name := obj.Object.(metav1.Object).GetName()
					err := waitEstablished(cmd.Context(), dyn, name)
					for again := 0; errors.Is(err, errCRDGone) && again < 3; again++ {
						// Deleted under us: another installation's
						// uninstall took it for the last one's.
						if _, err = apply(cmd.Context(), dyn, obj, false); err != nil {
							return err
						}
						fmt.Fprintf(o.streams.Out, "customresourcedefinitions %s applied again: it was deleted meanwhile (an uninstall elsewhere)\n", name)
						err = waitEstablished(cmd.Context(), dyn, name)
					}
					if err != nil {
						return err
					}
				}
			}
			if server {
				fmt.Fprintf(o.streams.Out, "nothing was changed (server dry run); install without --dry-run applies it and proves the admission policies enforced\n")
				return nil
			}
			what, err := ensureControl(cmd.Context(), client.CoreV1().ConfigMaps(o.namespace()), o.namespace())
			if err != nil {
				return err
			}
			fmt.Fprintln(o.streams.Out, what)
			tokens := manifests.PolicyName(mo.Namespace, "tokens")
			if err := proveEnforced(cmd.Context(), o.streams.Out, client, rc, mo, enforcementTimeout, func(p string) bool { return p != tokens }); err != nil {
				return err
			}
			// The tokens policy was made before the others, which the API
			// server enforces now: the right it narrows goes in, and it is
			// proven too.
			for _, obj := range later {
				what, err := apply(cmd.Context(), dyn, obj, false)
				if err != nil {
					return err
				}
				fmt.Fprintln(o.streams.Out, what)
			}
			return proveEnforced(cmd.Context(), o.streams.Out, client, rc, mo, enforcementTimeout, func(p string) bool { return p == tokens })
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "yaml: print the manifests instead of applying them")
	addDryRun(cmd, o, "print the manifests instead of applying them")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"yaml"}, cobra.ShellCompDirectiveNoFileComp))
	cmd.Flags().IntVar(&maxLeases, "max-leases", manifests.DefaultMaxLeases, "the namespace's quota of Leases (a record per node in maintenance, the locks of every group); -1: none")
	cmd.Flags().StringSliceVar(&audiences, "token-audiences", nil, "the API server's token audiences, which the agents' renewed tokens must have (default: learnt from a dry-run TokenRequest of default/default; with -o yaml and none given, no node may renew its token)")
	cmd.Flags().BoolVar(&kubeletEvictions, "kubelet-evictions", false, "give the agents no right to evict: each evicts its node's pods with the kubelet's kubeconfig (agent key drain.kubeletKubeconfig), which the API server holds to that node's own pods; agents without one refuse to start")
	return cmd
}

// apiAudiences are the API server's own audiences: those of a token it
// issues when asked for none (a server dry run of a TokenRequest for the
// ServiceAccount default/default, whose token is read and dropped). The
// tokens policy holds the agents' renewals to them.
func apiAudiences(ctx context.Context, client kubernetes.Interface) ([]string, error) {
	tr, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).CreateToken(ctx, "default", &authv1.TokenRequest{},
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return nil, fmt.Errorf("cannot learn the API server's token audiences (a dry run of a TokenRequest for default/default): %w", err)
	}
	if len(tr.Spec.Audiences) == 0 {
		return nil, fmt.Errorf("the API server names no audiences in a TokenRequest for default/default")
	}
	for _, a := range tr.Spec.Audiences {
		if strings.ContainsAny(a, `'\`) {
			return nil, fmt.Errorf("the API server's audience %q has a quote or a backslash", a)
		}
	}
	return tr.Spec.Audiences, nil
}

// objectNamespace is the namespace an object goes in ("" for a cluster-wide
// one).
func objectNamespace(obj manifests.Object) string {
	m, err := meta.Accessor(obj.Object)
	if err != nil {
		return ""
	}
	return m.GetNamespace()
}

// namespaceMissing tells whether ns does not exist.
func namespaceMissing(ctx context.Context, client kubernetes.Interface, ns string) (bool, error) {
	_, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case err == nil:
		return false, nil
	case apierrors.IsNotFound(err):
		return true, nil
	default:
		return false, status.Explain(err, "get", "namespaces", "")
	}
}

func printManifests(w io.Writer, objs []manifests.Object) error {
	b, err := manifests.YAML(objs)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// apply server-side-applies one object and says what happened to it.
// With dry, the apply is a server dry run (the client sends it so): the
// API server returns the object as it would be, with the resourceVersion
// it has, so only its content tells whether it would change.
func apply(ctx context.Context, dyn dynamic.Interface, obj manifests.Object, dry bool) (string, error) {
	ri, m, name, err := target(dyn, obj)
	if err != nil {
		return "", err
	}
	before, err := ri.Get(ctx, m.GetName(), metav1.GetOptions{})
	existed := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return "", status.Explain(err, "get", obj.Resource.Resource, m.GetNamespace())
	}
	body, err := json.Marshal(obj.Object)
	if err != nil {
		return "", err
	}
	force := true
	after, err := ri.Patch(ctx, m.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "kustodian-ctl", Force: &force})
	if err != nil {
		return "", status.Explain(err, "apply", obj.Resource.Resource, m.GetNamespace())
	}
	switch {
	case !existed:
		return name + " created", nil
	case unchanged(before, after, dry):
		return name + " unchanged", nil
	default:
		return name + " configured", nil
	}
}

// unchanged tells whether an apply left an object as it was. Objects with a
// generation (the admission policies) count only changes of their spec: a
// controller writes their status at any time.
func unchanged(before, after *unstructured.Unstructured, dry bool) bool {
	if after.GetGeneration() != 0 {
		return before.GetGeneration() == after.GetGeneration()
	}
	if dry {
		b, a := before.DeepCopy(), after.DeepCopy()
		for _, u := range []*unstructured.Unstructured{b, a} {
			u.SetManagedFields(nil)
			u.SetResourceVersion("")
		}
		return equality.Semantic.DeepEqual(b.Object, a.Object)
	}
	return before.GetResourceVersion() == after.GetResourceVersion()
}

// target is where an object is written, its metadata, and how to name it
// in a report ("roles kustodian-agent in kustodian").
func target(dyn dynamic.Interface, obj manifests.Object) (dynamic.ResourceInterface, *unstructured.Unstructured, string, error) {
	b, err := json.Marshal(obj.Object)
	if err != nil {
		return nil, nil, "", err
	}
	m := &unstructured.Unstructured{}
	if err := m.UnmarshalJSON(b); err != nil {
		return nil, nil, "", err
	}
	var ri dynamic.ResourceInterface = dyn.Resource(obj.Resource)
	name := fmt.Sprintf("%s %s", obj.Resource.Resource, m.GetName())
	if m.GetNamespace() != "" {
		ri = dyn.Resource(obj.Resource).Namespace(m.GetNamespace())
		name += " in " + m.GetNamespace()
	}
	return ri, m, name, nil
}

// errCRDGone: a CRD just applied is not there (deleted meanwhile).
var errCRDGone = errors.New("deleted after it was applied")

// waitEstablished waits until the API server serves a CRD, so that
// policies can be applied as soon as install returns.
func waitEstablished(ctx context.Context, dyn dynamic.Interface, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		crd, err := dyn.Resource(manifests.GVRCustomResourceDefinition).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, errCRDGone
		}
		if err != nil {
			return false, status.Explain(err, "get", "customresourcedefinitions", "")
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("the CustomResourceDefinition %s is not established: %w", name, err)
	}
	return nil
}

// ensureControl creates the control ConfigMap if it is missing; an
// existing one (perhaps paused) is left alone.
func ensureControl(ctx context.Context, cms interface {
	Create(context.Context, *corev1.ConfigMap, metav1.CreateOptions) (*corev1.ConfigMap, error)
}, ns string) (string, error) {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: lock.ControlConfigMap, Namespace: ns, Labels: map[string]string{lock.LabelManagedBy: lock.ManagedBy}},
		Data:       map[string]string{"paused": "false"},
	}
	_, err := cms.Create(ctx, cm, metav1.CreateOptions{})
	switch {
	case err == nil:
		return "configmaps control in " + ns + " created", nil
	case apierrors.IsAlreadyExists(err):
		return "configmaps control in " + ns + " kept", nil
	default:
		return "", status.Explain(err, "create", "configmaps", ns)
	}
}

// reportKubeletEvictions says which nodes are ready for
// --kubelet-evictions, as their agents found at their last start (the
// Node label kustodian.io/kubelet-evictions, which each node sets of
// itself): a node that is not cannot drain once the agents' own eviction
// right is gone.
func reportKubeletEvictions(ctx context.Context, w io.Writer, client kubernetes.Interface) error {
	var ready, unready, unknown []string
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := client.CoreV1().Nodes().List(ctx, opts)
		if err != nil {
			return status.Explain(err, "list", "nodes", "")
		}
		for _, n := range list.Items {
			switch n.Labels[nodemarks.LabelKubeletEvictions] {
			case "ready":
				ready = append(ready, n.Name)
			case "unready":
				unready = append(unready, n.Name)
			default:
				unknown = append(unknown, n.Name)
			}
		}
		if opts.Continue = list.Continue; opts.Continue == "" {
			break
		}
	}
	fmt.Fprintf(w, "kubelet evictions: %d node(s) ready", len(ready))
	if len(unready) > 0 {
		fmt.Fprintf(w, "; %d not, whose agents could not drain them (kustodian doctor on each says why): %s", len(unready), someNames(unready))
	}
	if len(unknown) > 0 {
		fmt.Fprintf(w, "; %d not known (no agent has started there since it could say): %s", len(unknown), someNames(unknown))
	}
	fmt.Fprintln(w)
	return nil
}

// someNames lists at most ten names, and how many more.
func someNames(names []string) string {
	if len(names) <= 10 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:10], ", "), len(names)-10)
}
