package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kustodian/kustodian/internal/manifests"
	"github.com/kustodian/kustodian/internal/status"
)

// servesAdmissionPolicies checks that the API server serves
// ValidatingAdmissionPolicies: without them the agents' RBAC alone would let
// every node cordon and drain every other.
func servesAdmissionPolicies(client kubernetes.Interface) error {
	gv := manifests.GVRValidatingAdmissionPolicy.GroupVersion().String()
	list, err := client.Discovery().ServerResourcesForGroupVersion(gv)
	if err != nil && !apierrors.IsNotFound(err) {
		return status.Explain(err, "discover", gv, "")
	}
	if list != nil {
		for _, r := range list.APIResources {
			if r.Name == manifests.GVRValidatingAdmissionPolicy.Resource {
				return nil
			}
		}
	}
	return fmt.Errorf("the cluster does not serve %s in %s (the API is disabled): without them every node's token could cordon and drain every node, so install refuses",
		manifests.GVRValidatingAdmissionPolicy.Resource, gv)
}

// enforcementTimeout bounds how long install waits for the API server to
// enforce the admission policies it applied (it loads them within seconds).
const enforcementTimeout = time.Minute

// probe is a dry-run request that one admission policy must refuse.
type probe struct {
	policy string
	try    func(context.Context) error
}

// admissionClients are the clients install and verify prove the policies
// with, once the cluster is known to serve ValidatingAdmissionPolicy.
func (o *options) admissionClients() (kubernetes.Interface, *rest.Config, error) {
	client, err := o.client()
	if err != nil {
		return nil, nil, err
	}
	rc, err := o.restConfig()
	if err != nil {
		return nil, nil, err
	}
	if err := supportedServer(client); err != nil {
		return nil, nil, err
	}
	if err := servesAdmissionPolicies(client); err != nil {
		return nil, nil, err
	}
	return client, rc, nil
}

// proveEnforced waits until each admission policy of the installation
// refuses a dry run of a request it must refuse, made with the agents'
// own ServiceAccount: a token bound to no Node, and one bound to a Node of
// the cluster (the first listed). The API server applies policies some
// seconds after they are created; until then the agents' rights stand
// alone, so install does not report success before.
//
// want says which policies to prove (nil: all): install proves the tokens
// policy apart, once it has granted the right it narrows.
func proveEnforced(ctx context.Context, w io.Writer, client kubernetes.Interface, rc *rest.Config, o manifests.Options, timeout time.Duration, want func(policy string) bool) error {
	start := time.Now()
	ns := o.Namespace
	dry := []string{metav1.DryRunAll}
	tokenClient := func(bound *authv1.BoundObjectReference) (kubernetes.Interface, error) {
		seconds := int64(600) // the shortest the API server grants
		tr, err := client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, manifests.AgentServiceAccount, &authv1.TokenRequest{
			Spec: authv1.TokenRequestSpec{ExpirationSeconds: &seconds, BoundObjectRef: bound}}, metav1.CreateOptions{})
		if err != nil {
			return nil, status.Explain(err, "create", "serviceaccounts/token", ns)
		}
		c := rest.AnonymousClientConfig(rc)
		c.BearerToken = tr.Status.Token
		return kubernetes.NewForConfig(c)
	}
	var probes []probe
	var skipped []string
	if o.KubeletEvictions {
		// Evictions were the one write of the ServiceAccount that only the
		// policy of unbound tokens covers; every other policy refuses
		// unbound tokens itself, and is probed below.
		skipped = append(skipped, "bound (the ServiceAccount may not evict)")
	} else {
		unbound, err := tokenClient(nil)
		if err != nil {
			return err
		}
		probes = append(probes, probe{manifests.PolicyName(ns, "bound"), func(ctx context.Context) error {
			return unbound.PolicyV1().Evictions(ns).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "kustodian-install-probe", Namespace: ns},
				DeleteOptions: &metav1.DeleteOptions{DryRun: dry}})
		}})
	}
	// A status update of a MaintenanceRollout needs one to exist: install
	// creates none to probe with.
	skipped = append(skipped, "rollouts (its probe would need a MaintenanceRollout)")
	// A deletion is refused for a pod on another Node: install deletes no
	// pod, not even in a dry run.
	skipped = append(skipped, "pods (its probe would need a pod on another Node)")
	// The token is bound to the first Node listed; when that Node goes
	// meanwhile (an autoscaler's), its token stops working (Unauthorized)
	// and another Node's is made.
	var n corev1.Node
	var node kubernetes.Interface
	bind := func() error {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return status.Explain(err, "list", "nodes", "")
		}
		if len(nodes.Items) == 0 {
			return nil
		}
		n = nodes.Items[0]
		node, err = tokenClient(&authv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: n.Name, UID: n.UID})
		return err
	}
	if err := bind(); err != nil {
		return err
	}
	if node == nil {
		skipped = append(skipped, "nodes, nodestatus, leases, tokens, events, kured (no Node to bind a token to)")
	} else {
		probes = append(probes,
			probe{manifests.PolicyName(ns, "nodes"), func(ctx context.Context) error {
				_, err := node.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType,
					[]byte(`{"metadata":{"labels":{"kustodian.io/install-probe":"refused"}}}`), metav1.PatchOptions{DryRun: dry})
				return err
			}},
			probe{manifests.PolicyName(ns, "nodestatus"), func(ctx context.Context) error {
				_, err := node.CoreV1().Nodes().Patch(ctx, n.Name, types.StrategicMergePatchType,
					// The metadata through the status: what an installation
					// older than this rule lets through.
					[]byte(`{"metadata":{"labels":{"kustodian.io/install-probe":"refused"}}}`), metav1.PatchOptions{DryRun: dry}, "status")
				return err
			}},
			probe{manifests.PolicyName(ns, "leases"), func(ctx context.Context) error {
				_, err := node.CoordinationV1().Leases(ns).Create(ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "kustodian-install-probe"}}, metav1.CreateOptions{DryRun: dry})
				return err
			}},
			probe{manifests.PolicyName(ns, "tokens"), func(ctx context.Context) error {
				// A token bound to no Node.
				_, err := node.CoreV1().ServiceAccounts(ns).CreateToken(ctx, manifests.AgentServiceAccount, &authv1.TokenRequest{}, metav1.CreateOptions{DryRun: dry})
				return err
			}},
			probe{manifests.PolicyName(ns, "events"), func(ctx context.Context) error {
				_, err := node.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "kustodian-install-probe-"},
					InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: metav1.NamespaceDefault, Name: "kustodian-install-probe"}}, metav1.CreateOptions{DryRun: dry})
				return err
			}})
		ds, err := client.AppsV1().DaemonSets(o.KuredNamespace).Get(ctx, o.KuredDaemonSet, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			skipped = append(skipped, fmt.Sprintf("kured (no DaemonSet %s/%s)", o.KuredNamespace, o.KuredDaemonSet))
		case err != nil:
			return status.Explain(err, "get", "daemonsets", o.KuredNamespace)
		default:
			probes = append(probes, probe{manifests.PolicyName(ns, "kured"), func(ctx context.Context) error {
				changed := ds.DeepCopy()
				if changed.Labels == nil {
					changed.Labels = map[string]string{}
				}
				changed.Labels["kustodian.io/install-probe"] = "refused"
				_, err := node.AppsV1().DaemonSets(o.KuredNamespace).Update(ctx, changed, metav1.UpdateOptions{DryRun: dry})
				if apierrors.IsConflict(err) { // Kured's DaemonSet changed meanwhile
					if fresh, gerr := client.AppsV1().DaemonSets(o.KuredNamespace).Get(ctx, o.KuredDaemonSet, metav1.GetOptions{}); gerr == nil {
						ds = fresh
					}
				}
				return err
			}})
		}
	}

	last := map[string]error{}
	pending := map[string]probe{}
	for _, p := range probes {
		if want == nil || want(p.policy) {
			pending[p.policy] = p
		}
	}
	proving := len(pending)
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		rebind := false
		for name, p := range pending {
			err := p.try(ctx)
			if refusedBy(err, name) {
				delete(pending, name)
				continue
			}
			rebind = rebind || apierrors.IsUnauthorized(err)
			// An answer cut short by the deadline (or the client's rate
			// limiter seeing it come) says nothing of the policy.
			if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) && (err == nil || !strings.Contains(err.Error(), "would exceed context deadline")) {
				last[name] = err
			}
		}
		if rebind && node != nil {
			if err := bind(); err != nil {
				last["token"] = err
			}
		}
		return len(pending) == 0, nil
	})
	if err != nil {
		var why []string
		for name := range pending {
			answer := "allowed"
			if last[name] != nil {
				answer = last[name].Error()
			}
			why = append(why, fmt.Sprintf("%s (last answer: %s)", name, answer))
		}
		sort.Strings(why)
		if last["token"] != nil {
			why = append(why, "binding a token to another Node: "+last["token"].Error())
		}
		if errors.Is(err, context.DeadlineExceeded) || wait.Interrupted(err) {
			err = fmt.Errorf("after %s", timeout)
		}
		return fmt.Errorf("the admission policies are not enforced %v: %s. The agents' rights are installed without them: find out why (is ValidatingAdmissionPolicy enabled in the API server?) or run kustodian-ctl uninstall",
			err, strings.Join(why, "; "))
	}
	if want != nil && proving == 0 {
		return nil // nothing of what was asked could be probed: said with the others
	}
	msg := fmt.Sprintf("admission policies enforced: %d refused a dry run as they must (%s)", proving, time.Since(start).Round(100*time.Millisecond))
	if len(skipped) > 0 && (want == nil || proving > 1) {
		msg += "; not probed: " + strings.Join(skipped, ", ")
	}
	fmt.Fprintln(w, msg)
	return nil
}

// refusedBy tells whether err is policy's refusal.
func refusedBy(err error, policy string) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policy+"'")
}
