// Package manifests is what `kustodian-ctl install` puts into a cluster: the
// namespace, the agents' ServiceAccount, the RBAC the protocol needs and
// nothing more, and the admission policies that keep each node to itself. Objects outside the namespace carry its name, so that
// several installations (tests, separate fleets) never share them.
package manifests

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// AgentServiceAccount is the ServiceAccount whose Node-bound tokens the
// agents use.
const AgentServiceAccount = "kustodian-agent"

// Options of an installation.
type Options struct {
	Namespace      string
	KuredNamespace string // where Kured's DaemonSet lives
	KuredDaemonSet string
	// KuredLockAnnotations are the annotations of Kured's DaemonSet an
	// agent may write its entry in Kured's lock under (empty:
	// kured.LockAnnotations).
	KuredLockAnnotations []string
	// MaxLeases bounds the Leases of the namespace (ResourceQuota): 0 means
	// DefaultMaxLeases, a negative number no quota.
	MaxLeases int
	// KubeletEvictions: the agents evict with their node's kubelet identity
	// (drain.kubeletKubeconfig), which the API server holds to the node's
	// own pods; their ServiceAccount gets no eviction right at all.
	KubeletEvictions bool
	// TokenAudiences are the API server's own audiences (those of a token
	// requested for none), the only ones an agent may mint its token for;
	// empty: not known, and not checked.
	TokenAudiences []string
}

// Object is one manifest with the resource it is written to.
type Object struct {
	Resource schema.GroupVersionResource
	Object   runtime.Object
}

func labels() map[string]string {
	return map[string]string{"app.kubernetes.io/managed-by": "kustodian", "app.kubernetes.io/name": "kustodian"}
}

func meta(name, ns string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels()}
}

var (
	gvrNamespace          = corev1.SchemeGroupVersion.WithResource("namespaces")
	gvrServiceAccount     = corev1.SchemeGroupVersion.WithResource("serviceaccounts")
	gvrClusterRole        = rbacv1.SchemeGroupVersion.WithResource("clusterroles")
	gvrClusterRoleBinding = rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings")
	gvrRole               = rbacv1.SchemeGroupVersion.WithResource("roles")
	gvrRoleBinding        = rbacv1.SchemeGroupVersion.WithResource("rolebindings")
)

// Objects are the manifests, in the order they are applied.
func Objects(o Options) []Object {
	ns := o.Namespace
	agent := []rbacv1.Subject{{Kind: "ServiceAccount", Name: AgentServiceAccount, Namespace: ns}}
	cluster := AgentServiceAccount + "-" + ns // cluster-wide and foreign-namespace objects
	out := []Object{
		PolicyCRD(),
		RolloutCRD(),
		RequestCRD(),
		{gvrNamespace, &corev1.Namespace{TypeMeta: typeMeta("v1", "Namespace"), ObjectMeta: meta(ns, "")}},
		{gvrServiceAccount, &corev1.ServiceAccount{TypeMeta: typeMeta("v1", "ServiceAccount"), ObjectMeta: meta(AgentServiceAccount, ns)}},
	}
	// The admission policies and the limits before the rights they narrow;
	// uninstall, going backwards, takes the rights away before them.
	out = append(out, policyObjects(o)...)
	out = append(out, limitObjects(o, cluster)...)
	return append(out, []Object{
		{gvrClusterRole, &rbacv1.ClusterRole{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRole"), ObjectMeta: meta(cluster, ""),
			Rules: agentClusterRules(o)}},
		{gvrClusterRoleBinding, &rbacv1.ClusterRoleBinding{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"), ObjectMeta: meta(cluster, ""),
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: cluster}, Subjects: agent}},
		// In its namespace: the lock and record Leases, the control
		// ConfigMap (and the rollouts' scripts in ConfigMaps), the
		// MaintenancePolicies and MaintenanceRollouts.
		{gvrRole, &rbacv1.Role{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "Role"), ObjectMeta: meta(AgentServiceAccount, ns),
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{"kustodian.io"}, Resources: []string{"maintenancepolicies", "maintenancerollouts"}, Verbs: []string{"get", "list", "watch"}},
				// Each node's entry in a rollout's status (the admission
				// policy keeps it to its own): applied (patch), and the
				// summary beside the entries (update).
				{APIGroups: []string{"kustodian.io"}, Resources: []string{"maintenancerollouts/status"}, Verbs: []string{"get", "update", "patch"}},
			}}},
		{gvrRoleBinding, &rbacv1.RoleBinding{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"), ObjectMeta: meta(AgentServiceAccount, ns),
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: AgentServiceAccount}, Subjects: agent}},
		// Events about Nodes live in "default" (the API server's rule).
		{gvrRole, &rbacv1.Role{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "Role"), ObjectMeta: meta(cluster, "default"),
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}}}}},
		{gvrRoleBinding, &rbacv1.RoleBinding{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"), ObjectMeta: meta(cluster, "default"),
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: cluster}, Subjects: agent}},
		// Kured's lock: update of its DaemonSet, and nothing else there.
		{gvrRole, &rbacv1.Role{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "Role"), ObjectMeta: meta(cluster, o.KuredNamespace),
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, ResourceNames: []string{o.KuredDaemonSet}, Verbs: []string{"update"}}}}},
		{gvrRoleBinding, &rbacv1.RoleBinding{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"), ObjectMeta: meta(cluster, o.KuredNamespace),
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: cluster}, Subjects: agent}},
		// Last, in a Role of its own: its own token's renewal, of its own
		// ServiceAccount (the tokens policy holds it to its own Node, a
		// bounded lifetime and the API server's audiences). Install grants
		// it only once the other policies, made after the tokens policy,
		// are enforced (TokenRight).
		{gvrRole, &rbacv1.Role{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "Role"), ObjectMeta: meta(TokenRoleName, ns),
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"}, ResourceNames: []string{AgentServiceAccount}, Verbs: []string{"create"}}}}},
		{gvrRoleBinding, &rbacv1.RoleBinding{TypeMeta: typeMeta("rbac.authorization.k8s.io/v1", "RoleBinding"), ObjectMeta: meta(TokenRoleName, ns),
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: TokenRoleName}, Subjects: agent}},
	}...)
}

// TokenRoleName is the Role (and RoleBinding) that lets the agents renew
// their own tokens.
const TokenRoleName = AgentServiceAccount + "-tokens"

// TokenRight tells whether obj grants the agents their tokens' renewal:
// install applies it after proving the other admission policies enforced.
func TokenRight(obj Object) bool {
	m, ok := obj.Object.(interface{ GetName() string })
	return ok && (obj.Resource == gvrRole || obj.Resource == gvrRoleBinding) && m.GetName() == TokenRoleName
}

// agentClusterRules are the agents' rights across the cluster: its own Node
// (cordon, label, annotation; the admission policy keeps each node to its
// own), the Nodes' health (health.maxUnavailable), the pods to drain and
// their evictions (none with KubeletEvictions), DaemonSets (the drain skips
// their pods).
func agentClusterRules(o Options) []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch", "patch"}},
		// Its own Node's maintenance conditions (the admission policy
		// holds it to them).
		{APIGroups: []string{""}, Resources: []string{"nodes/status"}, Verbs: []string{"patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
	}
	if !o.KubeletEvictions {
		// Evictions, and the deletions of a policy's drain escalation (the
		// admission policy holds them to its own Node's pods); with
		// kubelet evictions both go through the kubelet's identity.
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"delete"}})
	}
	return append(rules,
		// The MaintenanceRequests asked from the cluster: read, and the
		// status of its own Node's written (the requests policy holds it
		// to them).
		rbacv1.PolicyRule{APIGroups: []string{"kustodian.io"}, Resources: []string{"maintenancerequests"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{"kustodian.io"}, Resources: []string{"maintenancerequests/status"}, Verbs: []string{"patch"}},
		// A policy's drain escalation: the namespaces' labels, and an Event
		// on each pod deleted (the admission policy allows only that one).
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create"}},
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"get", "list", "watch"}},
		// health.workloadsRecovered reads the availability of what a drain disrupted.
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets", "replicasets"}, Verbs: []string{"get"}},
	)
}

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}
