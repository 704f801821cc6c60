package integration

import (
	"context"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kustodian/kustodian/internal/manifests"
)

// tokenTargets are the TokenRequests node A's token may and may not make
// (server dry runs, which return a token all the same, dropped here): its
// own renewal, and each way of asking for more.
func tokenTargets(asA kubernetes.Interface, ns string, nodeA, nodeB *corev1.Node, podA *corev1.Pod) map[string]target {
	mint := func(sa string, spec authnv1.TokenRequestSpec) target {
		return target{wholeCall: func(ctx context.Context) error {
			_, err := asA.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authnv1.TokenRequest{Spec: spec}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}}
	}
	to := func(n *corev1.Node) *authnv1.BoundObjectReference {
		return &authnv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: n.Name, UID: n.UID}
	}
	seconds := func(s int64) *int64 { return &s }
	agent := manifests.AgentServiceAccount
	return map[string]target{
		// 90 days, the longest allowed.
		"a token of its own ServiceAccount bound to its own Node": mint(agent, authnv1.TokenRequestSpec{BoundObjectRef: to(nodeA), ExpirationSeconds: seconds(90 * 24 * 3600)}),
		"a token bound to another Node":                           mint(agent, authnv1.TokenRequestSpec{BoundObjectRef: to(nodeB)}),
		"a token bound to its own Node's name with another UID": mint(agent, authnv1.TokenRequestSpec{
			BoundObjectRef: &authnv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: nodeA.Name, UID: nodeB.UID}}),
		"a token bound to no Node": mint(agent, authnv1.TokenRequestSpec{}),
		"a token bound to a pod on its own Node": mint(agent, authnv1.TokenRequestSpec{
			BoundObjectRef: &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: podA.Name, UID: podA.UID}}),
		"a token of another ServiceAccount": mint("default", authnv1.TokenRequestSpec{BoundObjectRef: to(nodeA)}),
		"a token for more than 90 days":     mint(agent, authnv1.TokenRequestSpec{BoundObjectRef: to(nodeA), ExpirationSeconds: seconds(90*24*3600 + 1)}),
		"a token for another audience":      mint(agent, authnv1.TokenRequestSpec{BoundObjectRef: to(nodeA), Audiences: []string{"vault"}}),
	}
}
