//go:build kured

package integration

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/kuredproc"
)

// kuredBinary is Kured's own binary (make kured puts its path in KURED).
func kuredBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("KURED")
	if bin == "" {
		t.Fatal("KURED is not set: make test-integration builds Kured's own binary (make kured) and sets it")
	}
	return bin
}

// startKured runs Kured's own binary for node, sandboxed, with a token of
// a ServiceAccount kured that has Kured's own RBAC.
func startKured(t *testing.T, e *cluster.Env, node string, period time.Duration, args ...string) *kuredproc.Kured {
	t.Helper()
	kuredAccount(t, e)
	seconds := int64(3600)
	tr, err := e.Client.CoreV1().ServiceAccounts(e.Namespace).CreateToken(e.Ctx, "kured", &authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(e.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	ca := e.Config.CAData
	if len(ca) == 0 {
		if ca, err = os.ReadFile(e.Config.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	k, err := kuredproc.Start(kuredproc.Config{Binary: kuredBinary(t), Node: node, DSNamespace: e.Namespace, APIHost: u.Hostname(), APIPort: port,
		Token: []byte(tr.Status.Token), CA: ca, Period: period, Dir: filepath.Join(t.TempDir(), node), Args: args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		k.Stop()
		if t.Failed() {
			t.Logf("Kured on %s:\n%s", node, k.Log())
		}
	})
	return k
}

// kuredAccount gives the ServiceAccount kured Kured's own RBAC, once.
func kuredAccount(t *testing.T, e *cluster.Env) {
	t.Helper()
	if _, err := e.Client.CoreV1().ServiceAccounts(e.Namespace).Get(e.Ctx, "kured", metav1.GetOptions{}); err == nil {
		return
	}
	if _, err := e.Client.CoreV1().ServiceAccounts(e.Namespace).Create(e.Ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "kured"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	name := "kured-" + e.Namespace
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "delete", "get"}},
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
	}
	if _, err := e.Client.RbacV1().ClusterRoles().Create(e.Ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Client.RbacV1().ClusterRoleBindings().Create(e.Ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "kured", Namespace: e.Namespace}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = e.Client.RbacV1().ClusterRoles().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// Smoke: Kured's own binary, sandboxed, reboots its node when the sentinel
// says so: it takes its lock, cordons the node and runs its reboot command.
func TestRealKuredReboots(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(1)
	e.KuredDaemonSet(e.Namespace, "")
	k := startKured(t, e, nodes[0], 5*time.Second)
	if err := os.WriteFile(k.Sentinel(), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.Eventually("Kured to reboot "+nodes[0], 3*time.Minute, func(ctx context.Context) error {
		if k.Exited() {
			return fmt.Errorf("Kured exited:\n%s", k.Log())
		}
		if !k.Rebooted() {
			return fmt.Errorf("not rebooted yet; cordoned %v, lock %q", nodeObject(e, nodes[0]).Spec.Unschedulable, kuredAnnotation(t, e))
		}
		return nil
	})
	t.Logf("lock %s, cordoned %v", kuredAnnotation(t, e), nodeObject(e, nodes[0]).Spec.Unschedulable)
}
