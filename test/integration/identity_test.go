package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authv1 "k8s.io/api/authentication/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"

	"github.com/kustodian/kustodian/internal/identity"
	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/manifests"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// kustodian-ctl kubeconfig mints a kubeconfig whose token is bound to the
// Node: the API server sees the node's name in the user's extra info, the
// agent takes its name from it and refuses another, and the token dies
// with the Node.
func TestNodeKubeconfig(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "kustodian-agent", Namespace: e.Namespace}}
	if _, err := e.Client.CoreV1().ServiceAccounts(e.Namespace).Create(e.Ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "node.kubeconfig")
	out := mustCtl(t, e, "kubeconfig", nodes[0], "--output-file", path)
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
	// 90 days by default, and TLS verified with the cluster's CA.
	tok, _ := identity.BoundNode(rc)
	if life := time.Until(time.Unix(tok.Expires, 0)); life < 89*24*time.Hour || life > 90*24*time.Hour {
		t.Errorf("the token lasts %s, want 90 days", life)
	}
	if rc.Insecure || len(rc.CAData) == 0 {
		t.Errorf("node kubeconfig: insecure=%v, %d bytes of CA", rc.Insecure, len(rc.CAData))
	}

	// --rotate renews in place: a new token for the same node, the rest kept.
	before, _ := os.ReadFile(path)
	if out := mustCtl(t, e, "kubeconfig", nodes[0], "--output-file", path, "--rotate", "--renew-before", "2000h"); !strings.Contains(out, "not renewed") {
		t.Errorf("--rotate with 90 days left and --renew-before 2000h: %q, want it left alone", out)
	}
	if now, _ := os.ReadFile(path); string(now) != string(before) {
		t.Error("--rotate changed a token it said it left alone")
	}
	if out := mustCtl(t, e, "kubeconfig", nodes[0], "--output-file", path, "--rotate", "--duration", "48h", "--renew-before", "2161h"); !strings.Contains(out, "renewed "+path) {
		t.Errorf("--rotate: %q", out)
	}
	rotated, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	if newTok, _ := identity.BoundNode(rotated); rotated.BearerToken == rc.BearerToken || newTok.Node != nodes[0] ||
		time.Until(time.Unix(newTok.Expires, 0)) > 48*time.Hour || rotated.Host != rc.Host || string(rotated.CAData) != string(rc.CAData) {
		t.Errorf("rotated kubeconfig: token changed %v, node %s, expires %v, host %s (was %s)", rotated.BearerToken != rc.BearerToken,
			newTok.Node, time.Unix(newTok.Expires, 0), rotated.Host, rc.Host)
	}
	if _, err := kubernetes.NewForConfigOrDie(rotated).AuthenticationV1().SelfSubjectReviews().Create(e.Ctx, &authv1.SelfSubjectReview{}, metav1.CreateOptions{}); err != nil {
		t.Errorf("the renewed token: %v", err)
	}
	if out, err := ctl(t, e, "kubeconfig", nodes[1], "--output-file", path, "--rotate"); err == nil || !strings.Contains(out, "is the kubeconfig of node "+nodes[0]+", not "+nodes[1]) {
		t.Errorf("--rotate for another node: %v %s", err, out)
	}

	// An admin kubeconfig that skips TLS verification: the node's would too.
	insecureAdmin := filepath.Join(t.TempDir(), "insecure.kubeconfig")
	raw, err := clientcmd.LoadFromFile(e.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range raw.Clusters {
		c.CertificateAuthorityData, c.CertificateAuthority, c.InsecureSkipTLSVerify = nil, "", true
	}
	if err := clientcmd.WriteToFile(*raw, insecureAdmin); err != nil {
		t.Fatal(err)
	}
	insecureCtl := func(extra ...string) (string, error) {
		out, err := exec.CommandContext(e.Ctx, ctlBinary(t), append([]string{"--kubeconfig", insecureAdmin, "-n", e.Namespace, "kubeconfig", nodes[1]}, extra...)...).CombinedOutput()
		return string(out), err
	}
	if out, err := insecureCtl(); err == nil || !strings.Contains(out, "would skip TLS verification (as the admin's does): give the API server's CA with --certificate-authority FILE") {
		t.Errorf("an insecure node kubeconfig written without asking: %v %s", err, out)
	}
	if out, err := insecureCtl("--insecure-node-kubeconfig"); err != nil || !strings.Contains(out, "insecure-skip-tls-verify: true") {
		t.Errorf("--insecure-node-kubeconfig: %v %s", err, out)
	}

	// The agent takes its name from the token, and refuses another.
	a := newAgent(t, e, nodes[1], "--kubeconfig", path)
	a.request("upgrade")
	out2, err := runOnce(a, nil)
	if err == nil || !strings.Contains(out2, `node name "`+nodes[1]+`" disagrees with kubeconfig`) || !strings.Contains(out2, `bound to node "`+nodes[0]+`"`) {
		t.Errorf("agent with another node's kubeconfig: %v\n%s", err, out2)
	}

	// Errors.
	if out, err := ctl(t, e, "kubeconfig", "no-such-node"); err == nil || !strings.Contains(out, `node "no-such-node" not found`) {
		t.Errorf("unknown node: %v %s", err, out)
	}
	bare := exec.CommandContext(e.Ctx, ctlBinary(t), "--kubeconfig", e.Kubeconfig, "-n", "default", "kubeconfig", nodes[0])
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
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	out := mustCtl(t, e, "install", "--kured-namespace", e.Namespace)
	for _, want := range []string{"serviceaccounts kustodian-agent in " + e.Namespace + " created", "clusterroles kustodian-agent-" + e.Namespace + " created",
		"validatingadmissionpolicies kustodian-agent-" + e.Namespace + "-leases created", "validatingadmissionpolicybindings kustodian-agent-" + e.Namespace + "-leases created",
		"configmaps control in " + e.Namespace + " created"} {
		if !strings.Contains(out, want) {
			t.Errorf("install output lacks %q:\n%s", want, out)
		}
	}
	t.Cleanup(func() {
		if err := nodecreds.Uninstall(e.Config, e.Namespace, e.Namespace); err != nil {
			t.Error(err)
		}
	})
	again := mustCtl(t, e, "install", "--kured-namespace", e.Namespace)
	if strings.Contains(again, "created") || strings.Contains(again, "configured") {
		t.Errorf("a second install changed things:\n%s", again)
	}

	path := filepath.Join(t.TempDir(), "node.kubeconfig")
	mustCtl(t, e, "kubeconfig", nodes[0], "--output-file", path)
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
	if _, err := e.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(e.Ctx, "kustodian-agent-"+e.Namespace+"-leases", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("admission policy still there: %v", err)
	}
}

// Node A's kubeconfig, in an installation with the admission policies,
// runs A's cycle (TestInstallThenNodeScopedCycle, and every agent test) but
// cannot touch B or anything beyond its own: each attempt is refused with a
// message that says what the node may do.
func TestNodeScopedPolicy(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	a, b := nodes[0], nodes[1]
	e.KuredDaemonSet(e.Namespace, "") // before install, which proves the kured policy too
	nodeA := clientFor(t, nodecreds.Kubeconfig(e, a))
	leasesA := nodeA.CoordinationV1().Leases(e.Namespace)
	cordon := []byte(`{"spec":{"unschedulable":true}}`)
	tr, err := e.Client.CoreV1().ServiceAccounts(e.Namespace).CreateToken(e.Ctx, manifests.AgentServiceAccount, &authv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc := rest.AnonymousClientConfig(e.Config)
	rc.BearerToken = tr.Status.Token
	unbound := kubernetes.NewForConfigOrDie(rc)

	// The API server applies policies a moment after they are created;
	// install returns only once it does, so that no agent (or attacker)
	// started after install meets RBAC alone: each policy refuses at once.
	dry := []string{metav1.DryRunAll}
	probes := map[string]func(ctx context.Context) error{
		"nodes": func(ctx context.Context) error {
			_, err := nodeA.CoreV1().Nodes().Patch(ctx, b, types.StrategicMergePatchType, cordon, metav1.PatchOptions{DryRun: dry})
			return err
		},
		"leases": func(ctx context.Context) error {
			_, err := leasesA.Create(ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.RecordName(b)}}, metav1.CreateOptions{DryRun: dry})
			return err
		},
		"events": func(ctx context.Context) error {
			_, err := nodeA.CoreV1().Events(metav1.NamespaceDefault).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"},
				InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: b}}, metav1.CreateOptions{DryRun: dry})
			return err
		},
		"kured": func(ctx context.Context) error {
			ds, err := nodeA.AppsV1().DaemonSets(e.Namespace).Get(ctx, "kured", metav1.GetOptions{})
			if err != nil {
				return err
			}
			ds.Spec.Template.Spec.Containers[0].Image = "probe"
			_, err = nodeA.AppsV1().DaemonSets(e.Namespace).Update(ctx, ds, metav1.UpdateOptions{DryRun: dry})
			return err
		},
		"bound": func(ctx context.Context) error {
			err := unbound.PolicyV1().Evictions(e.Namespace).Evict(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: e.Namespace},
				DeleteOptions: &metav1.DeleteOptions{DryRun: dry}})
			return err
		},
	}
	for name, probe := range probes {
		policy := "kustodian-agent-" + e.Namespace + "-" + name
		if err := probe(e.Ctx); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policy+"'") {
			t.Errorf("right after install, policy %s does not refuse what it must: %v", policy, err)
		}
	}

	// Its own Node: cordon and kustodian.io/ labels and annotations only.
	patchA := func(patch string) error {
		_, err := nodeA.CoreV1().Nodes().Patch(e.Ctx, a, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	if err := patchA(`{"spec":{"unschedulable":true},"metadata":{"labels":{"kustodian.io/state":"Draining"},"annotations":{"kustodian.io/cordoned":"true"}}}`); err != nil {
		t.Errorf("node %s may not cordon and label itself: %v", a, err)
	}
	if err := patchA(`{"spec":{"unschedulable":null},"metadata":{"labels":{"kustodian.io/state":null},"annotations":{"kustodian.io/cordoned":null}}}`); err != nil {
		t.Errorf("node %s may not undo that: %v", a, err)
	}
	_, err = nodeA.CoreV1().Nodes().Patch(e.Ctx, b, types.StrategicMergePatchType, cordon, metav1.PatchOptions{})
	denied(t, "cordon node B", err, "node "+a+" may change only its own Node, not "+b)
	denied(t, "taint itself", patchA(`{"spec":{"taints":[{"key":"x","value":"y","effect":"NoSchedule"}]}}`),
		"may change only spec.unschedulable of its Node, not taints")
	denied(t, "put a finalizer on itself", patchA(`{"metadata":{"finalizers":["example.com/keep"]}}`),
		"may change only labels and annotations of its Node's metadata, not finalizers")
	denied(t, "label itself outside kustodian.io/", patchA(`{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":""}}}`),
		"may change only the labels kustodian.io/state, kustodian.io/rollouts, kustodian.io/kubelet-evictions of its Node, not node-role.kubernetes.io/control-plane")
	denied(t, "drop a label of its own", patchA(`{"metadata":{"labels":{"`+cluster.LabelTestEnv+`":null}}}`),
		"may change only the labels kustodian.io/state, kustodian.io/rollouts, kustodian.io/kubelet-evictions of its Node, not "+cluster.LabelTestEnv)
	denied(t, "annotate itself outside kustodian.io/", patchA(`{"metadata":{"annotations":{"example.com/x":"y"}}}`),
		"may change only the annotations kustodian.io/cordoned, kustodian.io/autoscaler-protected, cluster-autoscaler.kubernetes.io/scale-down-disabled, kustodian.io/history, kustodian.io/quarantined, kustodian.io/agent-version of its Node, not example.com/x")
	// Its history: bounded.
	if err := patchA(`{"metadata":{"annotations":{"kustodian.io/history":"[]"}}}`); err != nil {
		t.Errorf("node %s may not keep its history: %v", a, err)
	}
	denied(t, "keep an unbounded history", patchA(`{"metadata":{"annotations":{"kustodian.io/history":"`+strings.Repeat("x", 8193)+`"}}}`),
		"may keep at most 8192 bytes of history in its annotation kustodian.io/history")
	// Its agent's version: bounded too.
	if err := patchA(`{"metadata":{"annotations":{"kustodian.io/agent-version":"v1.2.3"}}}`); err != nil {
		t.Errorf("node %s may not say its agent's version: %v", a, err)
	}
	for what, v := range map[string]string{"an unbounded version": strings.Repeat("x", 65), "a version with a space": "v1 on 30 node(s)",
		"a version of other letters": strings.Repeat("é", 10), "a version with an escape": `v1\u001b[2J`} {
		denied(t, "say "+what, patchA(`{"metadata":{"annotations":{"kustodian.io/agent-version":"`+v+`"}}}`),
			"may say its version in at most 64 letters, digits and . + ~ _ - (annotation kustodian.io/agent-version)")
	}
	// An admin's annotations: its place in the queue, its hold.
	denied(t, "raise its own priority", patchA(`{"metadata":{"annotations":{"kustodian.io/priority":"2147483647"}}}`),
		"of its Node, not kustodian.io/priority")
	denied(t, "lift its own hold", patchA(`{"metadata":{"annotations":{"kustodian.io/hold":"backup"}}}`),
		"of its Node, not kustodian.io/hold")
	// The autoscaler's annotation (a policy's autoscaler.protect): on its
	// own Node, and on no other.
	protect := `{"metadata":{"annotations":{"cluster-autoscaler.kubernetes.io/scale-down-disabled":"true","kustodian.io/autoscaler-protected":"true"}}}`
	if err := patchA(protect); err != nil {
		t.Errorf("node %s may not keep the autoscaler off itself: %v", a, err)
	}
	if err := patchA(`{"metadata":{"annotations":{"cluster-autoscaler.kubernetes.io/scale-down-disabled":null,"kustodian.io/autoscaler-protected":null}}}`); err != nil {
		t.Errorf("node %s may not undo that: %v", a, err)
	}
	_, err = nodeA.CoreV1().Nodes().Patch(e.Ctx, b, types.StrategicMergePatchType, []byte(protect), metav1.PatchOptions{})
	denied(t, "keep the autoscaler off node B", err, "node "+a+" may change only its own Node, not "+b)
	denied(t, "another autoscaler annotation", patchA(`{"metadata":{"annotations":{"cluster-autoscaler.kubernetes.io/safe-to-evict":"false"}}}`),
		"not cluster-autoscaler.kubernetes.io/safe-to-evict")

	// Records: its own only.
	_, err = leasesA.Create(e.Ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.RecordName(b)}, Spec: coordv1.LeaseSpec{HolderIdentity: &b}}, metav1.CreateOptions{})
	denied(t, "write record node-B", err, "node "+a+" may write only its own record node-"+a+", the lock Leases and the queue Leases, not Lease node-"+b)
	_, err = leasesA.Create(e.Ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "anything"}}, metav1.CreateOptions{})
	denied(t, "write another Lease", err, "not Lease anything")

	// Locks: only itself as holder, owned by its Node; never another's.
	lockName := lock.DefaultGroup.LockName(0)
	// The locks of every policy's groups are bound the same way.
	for _, name := range []string{lockName, lock.GroupRef{Policy: "zones", Group: "eu-1"}.LockName(1)} {
		_, err = leasesA.Create(e.Ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: coordv1.LeaseSpec{HolderIdentity: &b}}, metav1.CreateOptions{})
		denied(t, "make B the holder of lock "+name, err, "node "+a+" may make only itself the holder of lock "+name+", not "+b)
		_, err = leasesA.Create(e.Ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: coordv1.LeaseSpec{HolderIdentity: &a}}, metav1.CreateOptions{})
		denied(t, "hold lock "+name+" not owned by its Node", err, "must be owned by its Node alone")
	}

	nodeB := nodeObject(e, b)
	heldByB := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lockName, OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: b, UID: nodeB.UID}}},
		Spec: coordv1.LeaseSpec{HolderIdentity: &b}}
	if _, err := e.Client.CoordinationV1().Leases(e.Namespace).Create(e.Ctx, heldByB, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l, err := leasesA.Get(e.Ctx, lockName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	take := l.DeepCopy()
	take.Spec.HolderIdentity = &a
	take.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: a, UID: nodeObject(e, a).UID}}
	_, err = leasesA.Update(e.Ctx, take, metav1.UpdateOptions{})
	denied(t, "take a lock held by B", err, "lock "+lockName+" is held by "+b+"; node "+a+" may neither take it over nor release it (an admin may: kustodian-ctl release "+b+")")
	release := l.DeepCopy()
	empty := ""
	release.Spec.HolderIdentity = &empty
	release.OwnerReferences = nil
	_, err = leasesA.Update(e.Ctx, release, metav1.UpdateOptions{})
	denied(t, "release B's lock", err, "is held by "+b+"; node "+a+" may neither take it over nor release it")
	denied(t, "delete B's lock", leasesA.Delete(e.Ctx, lockName, metav1.DeleteOptions{}), "may not delete lock "+lockName)

	// Events: about its own Node only.
	ev := func(node string) *corev1.Event {
		return &corev1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"},
			InvolvedObject: corev1.ObjectReference{Kind: "Node", Name: node, UID: nodeObject(e, node).UID},
			Reason:         "Test", Message: "test", Type: corev1.EventTypeNormal, Source: corev1.EventSource{Component: "kustodian"}}
	}
	if _, err := nodeA.CoreV1().Events(metav1.NamespaceDefault).Create(e.Ctx, ev(a), metav1.CreateOptions{}); err != nil {
		t.Errorf("an Event about its own Node: %v", err)
	}
	_, err = nodeA.CoreV1().Events(metav1.NamespaceDefault).Create(e.Ctx, ev(b), metav1.CreateOptions{})
	denied(t, "an Event about B", err, "may record Events only about its own Node (and, from its own host, PodDeletedPastPDB about a pod it deleted), not this one about Node "+b)

	// Kured's DaemonSet: only its own entry in the lock annotation.
	dsA := nodeA.AppsV1().DaemonSets(e.Namespace)
	updateDS := func(change func(ds *appsv1.DaemonSet)) error {
		// The DaemonSet controller writes its status meanwhile.
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			ds, err := dsA.Get(e.Ctx, "kured", metav1.GetOptions{})
			if err != nil {
				return err
			}
			change(ds)
			_, err = dsA.Update(e.Ctx, ds, metav1.UpdateOptions{})
			return err
		})
	}
	own := `{"nodeID":"kustodian:` + a + `","metadata":{"unschedulable":false},"created":"2026-11-22T00:00:00Z","TTL":0}`
	if err := updateDS(func(ds *appsv1.DaemonSet) { ds.Annotations[kured.LockAnnotation] = own }); err != nil {
		t.Errorf("taking Kured's lock for itself: %v", err)
	}
	denied(t, "change Kured's pod template", updateDS(func(ds *appsv1.DaemonSet) {
		ds.Spec.Template.Spec.Containers[0].Image = "evil"
	}), "may change only the annotations "+strings.Join(kured.LockAnnotations, ", ")+" of DaemonSet "+e.Namespace+"/kured")
	setKuredAnnotation(t, e, strings.ReplaceAll(own, "kustodian:"+a, b)) // Kured rebooting B
	denied(t, "clear Kured's lock held by B", updateDS(func(ds *appsv1.DaemonSet) {
		delete(ds.Annotations, kured.LockAnnotation)
	}), "may change Kured's lock (annotation "+kured.LockAnnotation+") only to add its own entry kustodian:"+a)

	// A kustodian-agent token not bound to a Node may write nothing, not even
	// an eviction.
	_, err = unbound.CoordinationV1().Leases(e.Namespace).Create(e.Ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.RecordName(a)}, Spec: coordv1.LeaseSpec{HolderIdentity: &a}}, metav1.CreateOptions{})
	denied(t, "an unbound token writing a record", err, "is not bound to a Node; give each node its own kubeconfig: kustodian-ctl kubeconfig NODE")
	err = unbound.PolicyV1().Evictions("kube-system").Evict(e.Ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: "no-such-pod", Namespace: "kube-system"}})
	denied(t, "an unbound token evicting", err, "is not bound to a Node")
}
