package agent

import (
	"context"
	"fmt"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kustodian/kustodian/internal/nodemarks"
)

// checkEvictor makes sure, before the node joins the queue, that the drain
// will be allowed to evict: the kubelet's identity must be this node's own
// (system:node:NAME, which the API server holds to this node's pods), and
// without it the agent's own credentials must carry the eviction right
// (kustodian-ctl install --kubelet-evictions takes it away). A refusal
// found here stops the agent; found mid-drain, it would leave the node
// cordoned.
//
// What it finds goes on the Node (markNode) for kustodian-ctl install
// --kubelet-evictions: "ready" when the agent evicts as this node's
// kubelet, "unready" otherwise; an agent refused here says so on the Node
// before it stops.
func (a *Agent) checkEvictor(ctx context.Context) error {
	if a.evict.client != nil {
		r, err := a.evict.client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
			return a.unready(ctx, fmt.Errorf("drain.kubeletKubeconfig %s: the API server refuses its credentials (%v); fix the kubelet's kubeconfig, or set drain.kubeletKubeconfig to none", a.evict.config, err))
		}
		if err != nil {
			return fmt.Errorf("drain.kubeletKubeconfig %s: asking the API server who it is: %w", a.evict.config, err)
		}
		if want, got := "system:node:"+a.node, r.Status.UserInfo.Username; got != want {
			return a.unready(ctx, fmt.Errorf("drain.kubeletKubeconfig %s authenticates as %q, not as %q: it is not this node's kubelet identity; set drain.kubeletKubeconfig to this node's kubelet kubeconfig, or to none", a.evict.config, got, want))
		}
		a.log.Info("evicting with the kubelet's identity", "kubeconfig", a.evict.config, "user", r.Status.UserInfo.Username)
		a.reported.marks.evictions = "ready"
		return nil
	}
	a.reported.marks.evictions = "unready"
	r, err := a.kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authzv1.SelfSubjectAccessReview{Spec: authzv1.SelfSubjectAccessReviewSpec{
		ResourceAttributes: &authzv1.ResourceAttributes{Verb: "create", Resource: "pods", Subresource: "eviction"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("asking the API server whether this agent may evict pods: %w", err)
	}
	if !r.Status.Allowed {
		return a.unready(ctx, fmt.Errorf("kubeconfig %s may not evict pods (installed with kustodian-ctl install --kubelet-evictions), and no kubelet kubeconfig is in use: set drain.kubeletKubeconfig to this node's kubelet kubeconfig", a.cfg.Kubeconfig))
	}
	return nil
}

// unready labels the Node unready for kubelet evictions (as far as it can:
// the agent stops anyway) and returns err as a permanent error.
func (a *Agent) unready(ctx context.Context, err error) error {
	if lerr := a.nodes.label(ctx, nodemarks.LabelKubeletEvictions, ptr.To("unready")); lerr != nil {
		a.log.Warn("cannot label the node unready for kubelet evictions", "err", lerr)
	}
	return permanent(err)
}

// markNode keeps what the agent says of itself on its Node, as it found it
// at its start: the label kustodian.io/kubelet-evictions (for
// kustodian-ctl install --kubelet-evictions) and its version (for
// kustodian-ctl version). They only inform: an admission policy older than
// the agent (install not run again since an upgrade) refuses them, which is
// said once and holds nothing back.
func (a *Agent) markNode(ctx context.Context, node *corev1.Node) {
	if node == nil {
		return
	}
	if v := a.reported.marks.evictions; v != "" && node.Labels[nodemarks.LabelKubeletEvictions] != v {
		if err := a.nodes.label(ctx, nodemarks.LabelKubeletEvictions, &v); err != nil {
			a.log.Warn("cannot label the node for kustodian-ctl install --kubelet-evictions (run kustodian-ctl install again after an upgrade); going on without it", "err", err)
			a.reported.marks.evictions = ""
		}
	}
	if v := a.reported.marks.version; v != "" && node.Annotations[nodemarks.AnnotationAgentVersion] != v {
		switch err := a.nodes.annotate(ctx, nodemarks.AnnotationAgentVersion, &v); {
		case apierrors.IsForbidden(err), apierrors.IsInvalid(err):
			// Refused for good: said once.
			a.log.Warn("cannot show this agent's version on its node for kustodian-ctl version (run kustodian-ctl install again after an upgrade); going on without it", "err", err)
			a.reported.marks.version = ""
		case err != nil:
			a.log.Debug("showing this agent's version on its node; again at the next step", "err", err)
		}
	}
}
