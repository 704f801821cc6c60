//go:build kured

package integration

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/follow"
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

// cordonRecorder follows the test's Nodes and keeps the most nodes it saw
// cordoned at once, and which: its own rule, from the API server's
// evidence (each Node's spec.unschedulable), not Kustodian's code.
type cordonRecorder struct {
	mu       sync.Mutex
	cordoned map[string]bool
	most     []string
	failed   error
}

func recordCordons(t *testing.T, e *cluster.Env, nodes []string) *cordonRecorder {
	t.Helper()
	ours := map[string]bool{}
	for _, n := range nodes {
		ours[n] = true
	}
	r := &cordonRecorder{cordoned: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	nodesAPI := e.Client.CoreV1().Nodes()
	err := follow.Start(ctx, follow.Source{What: "the Nodes",
		List:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return nodesAPI.List(ctx, o) },
		Watch: nodesAPI.Watch,
	}, follow.Handlers{
		Observe: func(ev follow.Event) {
			n, ok := ev.Object.(*corev1.Node)
			if !ok || !ours[n.Name] {
				return
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			r.cordoned[n.Name] = ev.Type != watch.Deleted && n.Spec.Unschedulable
			var now []string
			for name, c := range r.cordoned {
				if c {
					now = append(now, name)
				}
			}
			if len(now) > len(r.most) {
				sort.Strings(now)
				r.most = now
			}
		},
		Gap:  func(from, to string) {},
		Fail: func(err error) { r.mu.Lock(); r.failed = err; r.mu.Unlock() },
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// check fails the test when more than limit nodes were cordoned at once, or
// the recorder lost its history.
func (r *cordonRecorder) check(t *testing.T, limit int) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed != nil {
		t.Fatalf("the cordon recorder failed: %v", r.failed)
	}
	if len(r.most) > limit {
		t.Errorf("%d nodes cordoned at once (%v), at most %d allowed", len(r.most), r.most, limit)
	}
}

// Kured's own binary and a Kustodian agent take turns: while Kustodian
// maintains node B (holding Kured's lock), Kured on node A is refused its
// lock; once B is back, Kured takes it, cordons A and reboots; after the
// reboot (Kured started again, the sentinel gone) it uncordons A and gives
// its lock back. Never both nodes cordoned at once.
func TestRealKuredAndKustodianTakeTurns(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(2)
	a, b := nodes[0], nodes[1]
	e.KuredDaemonSet(e.Namespace, "")
	cordons := recordCordons(t, e, nodes)
	agent := newAgent(t, e, b, "--kured-namespace", e.Namespace)
	agent.request("kernel")
	agent.start()
	agent.waitInProgress(cluster.DefaultTimeout)

	k := startKured(t, e, a, 5*time.Second)
	if err := os.WriteFile(k.Sentinel(), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	e.Eventually("Kured to try its lock while Kustodian holds it", 3*time.Minute, func(context.Context) error {
		if !strings.Contains(k.Log(), "Lock already held: kustodian:"+b) && !k.Rebooted() {
			return fmt.Errorf("Kured has not tried yet")
		}
		return nil
	})
	cordons.check(t, 1)
	if k.Rebooted() || nodeObject(e, a).Spec.Unschedulable {
		t.Fatalf("Kured went ahead while Kustodian held the lock")
	}
	agent.completes()
	e.Eventually("Kured to reboot "+a, 3*time.Minute, func(context.Context) error {
		if !k.Rebooted() {
			return fmt.Errorf("not rebooted yet; lock %q", kuredAnnotation(t, e))
		}
		return nil
	})
	// The reboot: Kured starts again on a host that needs none.
	k.Stop()
	if err := os.Remove(k.Sentinel()); err != nil {
		t.Fatal(err)
	}
	k2 := startKured(t, e, a, 5*time.Second)
	e.Eventually("Kured to give "+a+" back after its reboot", 3*time.Minute, func(context.Context) error {
		if k2.Exited() {
			return fmt.Errorf("Kured exited")
		}
		if nodeObject(e, a).Spec.Unschedulable || kuredAnnotation(t, e) != "" {
			return fmt.Errorf("cordoned %v, lock %q", nodeObject(e, a).Spec.Unschedulable, kuredAnnotation(t, e))
		}
		return nil
	})
	cordons.check(t, 1)
}
