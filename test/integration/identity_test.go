package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	authv1 "k8s.io/api/authentication/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kustodian/kustodian/internal/identity"
	"github.com/kustodian/kustodian/test/cluster"
)

// kustodian-ctl kubeconfig mints a kubeconfig whose token is bound to the
// Node: the API server sees the node's name in the user's extra info, the
// agent takes its name from it and refuses another, and the token dies
// with the Node.
func TestNodeKubeconfig(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(2)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "kustodian-agent", Namespace: e.Namespace}}
	if _, err := e.Client.CoreV1().ServiceAccounts(e.Namespace).Create(e.Ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "node.kubeconfig")
	out := mustCtl(t, e, "kubeconfig", nodes[0], "-f", path)
	if !strings.Contains(out, "wrote "+path) {
		t.Errorf("kubeconfig said %q", out)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig file: %v mode %v, want 0600", err, st.Mode().Perm())
	}
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := identity.BoundNode(rc); err != nil || tok.Node != nodes[0] || tok.NodeUID != string(nodeObject(e, nodes[0]).UID) {
		t.Fatalf("the token is bound to %+v (%v), want %s", tok, err, nodes[0])
	}
	nodeClient := kubernetes.NewForConfigOrDie(rc)
	review, err := nodeClient.AuthenticationV1().SelfSubjectReviews().Create(e.Ctx, &authv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := review.Status.UserInfo.Extra["authentication.kubernetes.io/node-name"]; len(got) != 1 || got[0] != nodes[0] {
		t.Errorf("the API server sees node-name %v, want [%s]", got, nodes[0])
	}

	// The agent takes its name from the token, and refuses another.
	a := newAgent(t, e, nodes[1], "--kubeconfig", path)
	a.request("upgrade")
	out2, err := runOnce(a, nil)
	if err == nil || !strings.Contains(out2, `node name "`+nodes[1]+`" disagrees with kubeconfig`) || !strings.Contains(out2, `bound to node "`+nodes[0]+`"`) {
		t.Errorf("agent with another node's kubeconfig: %v\n%s", err, out2)
	}

	// Errors.
	if out, err := ctl(t, e, "kubeconfig", "no-such-node", "-f", "-"); err == nil || !strings.Contains(out, `node "no-such-node" not found`) {
		t.Errorf("unknown node: %v %s", err, out)
	}
	bare := exec.CommandContext(e.Ctx, ctlBinary(t), "--kubeconfig", e.Kubeconfig, "-n", "default", "kubeconfig", nodes[0], "-f", "-")
	if out, err := bare.CombinedOutput(); err == nil || !strings.Contains(string(out), "no ServiceAccount kustodian-agent in namespace default") {
		t.Errorf("namespace without the ServiceAccount: %v %s", err, out)
	}

	// The token dies with its Node.
	if err := e.Client.CoreV1().Nodes().Delete(e.Ctx, nodes[0], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually("the token to stop working", cluster.DefaultTimeout, func(ctx context.Context) error {
		_, err := nodeClient.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if apierrors.IsUnauthorized(err) {
			return nil
		}
		return fmt.Errorf("still accepted (%v)", err)
	})
}

// kustodian-ctl install gives the agents what the protocol needs: an agent
// with a node-scoped kubeconfig runs a whole cycle (drain with a PDB,
// Events, Leases) on those rights alone. A second install changes nothing.
func TestInstallThenNodeScopedCycle(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(2)
	out := mustCtl(t, e, "install", "--kured-namespace", e.Namespace)
	for _, want := range []string{"serviceaccounts kustodian-agent in " + e.Namespace + " created", "clusterroles kustodian-agent-" + e.Namespace + " created", "configmaps control in " + e.Namespace + " created"} {
		if !strings.Contains(out, want) {
			t.Errorf("install output lacks %q:\n%s", want, out)
		}
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = e.Client.RbacV1().ClusterRoleBindings().Delete(ctx, "kustodian-agent-"+e.Namespace, metav1.DeleteOptions{})
		_ = e.Client.RbacV1().ClusterRoles().Delete(ctx, "kustodian-agent-"+e.Namespace, metav1.DeleteOptions{})
		_ = e.Client.RbacV1().RoleBindings("default").Delete(ctx, "kustodian-agent-"+e.Namespace, metav1.DeleteOptions{})
		_ = e.Client.RbacV1().Roles("default").Delete(ctx, "kustodian-agent-"+e.Namespace, metav1.DeleteOptions{})
	})
	again := mustCtl(t, e, "install", "--kured-namespace", e.Namespace)
	if strings.Contains(again, "created") || strings.Contains(again, "configured") {
		t.Errorf("a second install changed things:\n%s", again)
	}

	path := filepath.Join(t.TempDir(), "node.kubeconfig")
	mustCtl(t, e, "kubeconfig", nodes[0], "-f", path)
	e.Cordon(nodes[1])
	e.Deployment("web", 4)
	e.PDB("web", "web", 3)
	e.RunningPods("web", 4)
	uncordon(e, nodes[1])

	a := newAgent(t, e, nodes[0], "--kubeconfig", path, "--node-name", "")
	a.request("upgrade")
	a.start()
	a.waitInProgress(cluster.DefaultTimeout)
	if pods, err := podsOn(e.Ctx, e, nodes[0]); err != nil || len(pods) != 0 {
		t.Errorf("pods left on the drained node: %v %v", pods, err)
	}
	a.completes()
	if strings.Contains(a.logText(), "forbidden") {
		t.Errorf("the agent met a forbidden request:\n%s", a.logText())
	}
	if nodeObject(e, nodes[0]).Spec.Unschedulable {
		t.Error("node still cordoned")
	}
}

// uninstall refuses while a node holds a lock, and with --force removes
// what install put there.
func TestUninstall(t *testing.T) {
	e := cluster.New(t)
	mustCtl(t, e, "install", "--kured-namespace", e.Namespace)
	holder := "some-node"
	if _, err := e.Client.CoordinationV1().Leases(e.Namespace).Create(e.Ctx, &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "lock-default-0"},
		Spec:       coordv1.LeaseSpec{HolderIdentity: &holder},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, err := ctl(t, e, "uninstall", "--kured-namespace", e.Namespace); err == nil || !strings.Contains(out, "some-node holds lock-default-0") {
		t.Fatalf("uninstall while a lock is held: %v %s", err, out)
	}
	if _, err := e.Client.CoreV1().ServiceAccounts(e.Namespace).Get(e.Ctx, "kustodian-agent", metav1.GetOptions{}); err != nil {
		t.Fatalf("a refused uninstall removed the ServiceAccount: %v", err)
	}
	out := mustCtl(t, e, "uninstall", "--force", "--kured-namespace", e.Namespace)
	for _, want := range []string{"clusterroles kustodian-agent-" + e.Namespace + " deleted", "serviceaccounts kustodian-agent in " + e.Namespace + " deleted", "namespaces " + e.Namespace + " deleted"} {
		if !strings.Contains(out, want) {
			t.Errorf("uninstall output lacks %q:\n%s", want, out)
		}
	}
	if _, err := e.Client.RbacV1().ClusterRoles().Get(e.Ctx, "kustodian-agent-"+e.Namespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ClusterRole still there: %v", err)
	}
}
