package integration

import (
	"fmt"
	"slices"
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
	"k8s.io/client-go/util/retry"

	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/manifests"
	"github.com/kustodian/kustodian/internal/nodemarks"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// The paths of docs/security.md, each tried with a node's own credentials
// against the API server and refused by it (docs/security.md lists them).

// A token of kustodian-agent bound to a Pod carries the node name of the
// Pod's node too; it must not pass for that node's token.
func TestSecurityPodBoundTokenIsRefused(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	a, b := nodes[0], nodes[1]
	nodeA := clientFor(t, nodecreds.Kubeconfig(e, a))

	// A node may mint a token for itself only (its renewal), not one
	// bound to another node (TestEveryWriteANodeCanMake tries the rest).
	_, err := nodeA.CoreV1().ServiceAccounts(e.Namespace).CreateToken(e.Ctx, manifests.AgentServiceAccount, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{BoundObjectRef: &authv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: b, UID: nodeObject(e, b).UID}}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("node %s minting a token bound to %s: %v, want forbidden", a, b, err)
	}
	_, err = nodeA.CoreV1().Pods(e.Namespace).Create(e.Ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "mine"},
		Spec: corev1.PodSpec{NodeName: b, ServiceAccountName: manifests.AgentServiceAccount, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("node %s creating a pod: %v, want forbidden", a, err)
	}

	// Someone who may create pods and tokens in the namespace (here the
	// admin) binds a token to a Pod on node B.
	pod, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "on-b"},
		Spec: corev1.PodSpec{NodeName: b, ServiceAccountName: manifests.AgentServiceAccount, Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := e.Client.CoreV1().ServiceAccounts(e.Namespace).CreateToken(e.Ctx, manifests.AgentServiceAccount, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{BoundObjectRef: &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc := rest.AnonymousClientConfig(e.Config)
	rc.BearerToken = tr.Status.Token
	podToken := kubernetes.NewForConfigOrDie(rc)

	// The premise: the API server gives this token B's node name.
	review, err := podToken.AuthenticationV1().SelfSubjectReviews().Create(e.Ctx, &authv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := review.Status.UserInfo.Extra["authentication.kubernetes.io/node-name"]; len(got) != 1 || got[0] != b {
		t.Fatalf("the pod-bound token's node-name is %v, not [%s]: this test would prove nothing", got, b)
	}

	_, err = podToken.CoreV1().Nodes().Patch(e.Ctx, b, types.StrategicMergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{})
	denied(t, "cordon B with a token bound to a Pod on B", err, "is not bound to a Node (it is bound to Pod on-b)")
	_, err = podToken.CoordinationV1().Leases(e.Namespace).Create(e.Ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.RecordName(b)},
		Spec: coordv1.LeaseSpec{HolderIdentity: &b}}, metav1.CreateOptions{})
	denied(t, "write B's record with a token bound to a Pod on B", err, "is not bound to a Node")
}

// A record no agent keeps (heartbeat in the year 2999, the highest
// priority, the first queue key, written with admin rights as a node may
// write its own) does not hold back a live node.
func TestSecurityForgedRecordDoesNotHeadTheQueue(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	ghost, real := nodes[0], nodes[1]
	future := metav1.NewMicroTime(time.Date(2999, 1, 1, 0, 0, 0, 0, time.UTC))
	forged := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.RecordName(ghost), Annotations: map[string]string{
		lock.AnnotationState: string(lock.Waiting), lock.AnnotationPriority: "2147483647", lock.AnnotationQueueKey: "1",
		lock.AnnotationPolicy: "default"}, Labels: map[string]string{lock.LabelManagedBy: lock.ManagedBy}},
		Spec: coordv1.LeaseSpec{HolderIdentity: &ghost, AcquireTime: &future, RenewTime: &future}}
	if _, err := e.Client.CoordinationV1().Leases(e.Namespace).Create(e.Ctx, forged, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := newAgent(t, e, real)
	p.request("patch")
	p.start()
	p.waitInProgress(cluster.DefaultTimeout)
	out, err := nodecreds.CtlFor(e).Run(e.Ctx, "queue")
	if err != nil {
		t.Fatalf("kustodian-ctl queue: %v\n%s", err, out)
	}
	if !strings.Contains(out, ghost) || !strings.Contains(out, "no (agent silent; skipped)") {
		t.Errorf("kustodian-ctl queue shows the forged record as live:\n%s", out)
	}
}

// Kured's lock: a node adds or removes its own entry and leaves every
// other entry as it is, in either of Kured's forms.
func TestSecurityKuredLockKeepsOthersEntries(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	a := e.Nodes(1)[0]
	e.KuredDaemonSet(e.Namespace, "")
	dsA := clientFor(t, nodecreds.Kubeconfig(e, a)).AppsV1().DaemonSets(e.Namespace)
	// writeKey sets the lock under key as A, from the value it reads.
	writeKey := func(key string, change func(old string) string) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			ds, err := dsA.Get(e.Ctx, "kured", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if v := change(ds.Annotations[key]); v == "" {
				delete(ds.Annotations, key)
			} else {
				ds.Annotations[key] = v
			}
			_, err = dsA.Update(e.Ctx, ds, metav1.UpdateOptions{})
			return err
		})
	}
	write := func(change func(old string) string) error { return writeKey(kured.LockAnnotation, change) }
	refused := "may change Kured's lock (annotation " + kured.LockAnnotation + ") only to add its own entry kustodian:"
	now := time.Now()
	mine, err := kured.Entry(kured.HolderID(a), now)
	if err != nil {
		t.Fatal(err)
	}
	b := `{"nodeID":"node-b","metadata":{"unschedulable":false},"created":"2026-11-22T11:00:00Z","TTL":0}`
	expired := `{"nodeID":"node-c","metadata":{"unschedulable":false},"created":"2020-01-01T00:00:00Z","TTL":60000000000}`

	// Kured's single lock, held by B: A's entry in a new list wipes B.
	setKuredAnnotation(t, e, b)
	denied(t, "wipe Kured's holder with a list holding only A", write(func(string) string { return `{"maxOwners":2,"locks":[` + mine + `]}` }), refused+a)
	denied(t, "write A's entry over B's", write(func(string) string { return mine }), refused+a)
	// An expired holder is Kured's to replace, not A's.
	setKuredAnnotation(t, e, expired)
	denied(t, "take over an expired holder", write(func(string) string { return mine }), refused+a)

	// Several owners: append, remove, and nothing else.
	list := `{"maxOwners":3,"locks":[` + b + `,` + expired + `]}`
	setKuredAnnotation(t, e, list)
	if err := write(func(old string) string { v, _ := kured.Take(old, mine); return v }); err != nil {
		t.Fatalf("A appending its entry: %v", err)
	}
	denied(t, "remove its own entry and B's", write(func(string) string { return `{"maxOwners":3,"locks":[` + expired + `]}` }), refused+a)
	denied(t, "replace an entry of Kured's", write(func(old string) string {
		return strings.Replace(old, "node-b", "node-x", 1)
	}), refused+a)
	if err := write(func(old string) string { v, _ := kured.GiveBack(old, kured.HolderID(a)); return v }); err != nil {
		t.Fatalf("A removing its entry: %v", err)
	}
	denied(t, "append its entry dropping the expired one", write(func(string) string {
		return `{"maxOwners":3,"locks":[` + b + `,` + mine + `]}`
	}), refused+a)
	// No room: a full list gets no entry, nor a second one of A's.
	setKuredAnnotation(t, e, `{"maxOwners":1,"locks":[`+b+`]}`)
	denied(t, "append to a full list", write(func(old string) string { v, _ := kured.Take(old, mine); return v }), refused+a)
	setKuredAnnotation(t, e, `{"maxOwners":3,"locks":[`+mine+`]}`)
	denied(t, "append a second entry of its own", write(func(old string) string {
		v, _ := kured.Take(old, strings.Replace(mine, now.UTC().Format("2006"), "2001", 1))
		return v
	}), refused+a)
	setKuredAnnotation(t, e, `{"maxOwners":3,"locks":[]}`)
	// A "created" Kured cannot parse would break Kured on every node.
	denied(t, "an entry Kured cannot parse", write(func(old string) string {
		v, _ := kured.Take(old, `{"nodeID":"kustodian:`+a+`","metadata":{"unschedulable":false},"created":"0","TTL":0}`)
		return v
	}), refused+a)
	// Its owners and finalizers: Kured's DaemonSet must not be collected.
	ds, err := e.Client.AppsV1().DaemonSets(e.Namespace).Get(e.Ctx, "kured", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	orphan := ds.DeepCopy()
	orphan.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: a, UID: nodeObject(e, a).UID}}
	_, err = dsA.Update(e.Ctx, orphan, metav1.UpdateOptions{})
	denied(t, "make Kured's DaemonSet go with its Node", err, "may change only the annotations "+strings.Join(kured.LockAnnotations, ", "))
	final := ds.DeepCopy()
	final.Finalizers = []string{"example.com/x"}
	_, err = dsA.Update(e.Ctx, final, metav1.UpdateOptions{})
	denied(t, "put a finalizer on Kured's DaemonSet", err, "may change only the annotations "+strings.Join(kured.LockAnnotations, ", "))

	// Its own entry in another form (a TTL that would let it expire into Kured's hands).
	denied(t, "an entry with a TTL", write(func(old string) string {
		v, _ := kured.Take(old, strings.Replace(mine, `"TTL":0`, `"TTL":1`, 1))
		return v
	}), refused+a)

	// The free single lock: take and give back.
	setKuredAnnotation(t, e, "")
	if err := write(func(old string) string { v, _ := kured.Take(old, mine); return v }); err != nil {
		t.Fatalf("A taking the free lock: %v", err)
	}
	if err := write(func(old string) string { v, _ := kured.GiveBack(old, kured.HolderID(a)); return v }); err != nil {
		t.Fatalf("A giving the lock back: %v", err)
	}

	// Kured's next key, absent: A creates it holding only its own entry,
	// in either form, and nothing else; any other key stays Kured's.
	next := kured.NextLockAnnotation
	refusedNext := strings.Replace(refused, kured.LockAnnotation, next, 1)
	denied(t, "create the next key holding B", writeKey(next, func(string) string { return b }), refusedNext+a)
	denied(t, "create the next key, several owners, holding B", writeKey(next, func(string) string { return `{"maxOwners":2,"locks":[` + b + `]}` }), refusedNext+a)
	denied(t, "create the next key, several owners, holding A and B", writeKey(next, func(string) string { return `{"maxOwners":2,"locks":[` + mine + `,` + b + `]}` }), refusedNext+a)
	denied(t, "write a key Kustodian does not honour", writeKey("example.com/kured-node-lock", func(string) string { return mine }), "may change only the annotations ")
	// A list of several owners only as Kured's own --concurrency says: a
	// Kured of one owner reads any value as held, a list as held by "".
	denied(t, "create the next key as a list while Kured runs with one owner", writeKey(next, func(string) string { return `{"maxOwners":2,"locks":[` + mine + `]}` }), refusedNext+a)
	updateKured(t, e, func(ds *appsv1.DaemonSet) { ds.Spec.Template.Spec.Containers[0].Args = []string{"--concurrency=2"} })
	denied(t, "create the next key with more room than Kured's --concurrency", writeKey(next, func(string) string { return `{"maxOwners":9,"locks":[` + mine + `]}` }), refusedNext+a)
	// CEL cannot read that time: the policy fails on it, and the write
	// with it.
	if err := writeKey(next, func(string) string {
		return strings.Replace(mine, now.UTC().Format("2006-01-02"), "2026-02-30", 1)
	}); err == nil || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy 'kustodian-agent-"+e.Namespace+"-kured'") {
		t.Errorf("an entry with a date that does not exist: %v, want it refused by the kured policy", err)
	}
	if err := writeKey(next, func(string) string { return `{"maxOwners":2,"locks":[` + mine + `]}` }); err != nil {
		t.Fatalf("A creating the next key with its own entry, several owners as Kured's --concurrency=2: %v", err)
	}
	if err := writeKey(next, func(old string) string { v, _ := kured.GiveBack(old, kured.HolderID(a)); return v }); err != nil {
		t.Fatalf("A giving the next key back: %v", err)
	}
	denied(t, "remove the next key it left as an empty list", writeKey(next, func(string) string { return "" }), refusedNext+a)
}

// Path 2: installed with --kubelet-evictions, the agents' ServiceAccount
// may evict no pod at all, and each agent evicts with its kubelet's
// identity, which the API server (Node authorizer, NodeRestriction) holds
// to its own node's pods. An agent without that identity, or with another
// node's, refuses to start before it touches anything.
func TestSecurityEvictionsAreTheKubelets(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(3)
	a, b, spare := nodes[0], nodes[1], nodes[2]
	nodecreds.Install(e, e.Namespace, "--kubelet-evictions")
	// web runs on A, other on B; the spare takes what A's drain evicts.
	e.Cordon(b)
	e.Cordon(spare)
	e.Deployment("web", 3)
	e.RunningPods("web", 3)
	e.Cordon(a)
	uncordon(e, b)
	e.Deployment("other", 2)
	e.RunningPods("other", 2)
	uncordon(e, a)
	uncordon(e, spare)
	onB, err := podsOn(e.Ctx, e, b)
	if err != nil || len(onB) != 2 {
		t.Fatalf("pods on %s: %v %v, want the 2 of other", b, onB, err)
	}
	onA, err := podsOn(e.Ctx, e, a)
	if err != nil || len(onA) != 3 {
		t.Fatalf("pods on %s: %v %v, want the 3 of web", a, onA, err)
	}
	evict := func(c kubernetes.Interface, pod string) error {
		ns, name, _ := strings.Cut(pod, "/")
		return c.PolicyV1().Evictions(ns).Evict(e.Ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}})
	}
	// A's own token evicts nothing, not even its own pods.
	tokenA := clientFor(t, nodecreds.Kubeconfig(e, a))
	for _, pod := range []string{onB[0], onA[0]} {
		if err := evict(tokenA, pod); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "pods/eviction") {
			t.Errorf("A's token evicting %s: %v, want forbidden by RBAC", pod, err)
		}
	}
	// A's kubelet identity evicts A's pods only.
	kubeletA := clientFor(t, e.KubeletKubeconfig(a))
	if err := evict(kubeletA, onB[0]); !apierrors.IsForbidden(err) {
		t.Errorf("A's kubelet evicting %s of %s: %v, want forbidden", onB[0], b, err)
	}
	if err := evict(kubeletA, onA[0]); err != nil {
		t.Errorf("A's kubelet evicting its own %s (dry run): %v", onA[0], err)
	}

	// Without a kubelet kubeconfig, or with another node's, B's agent
	// refuses to start, saying what to set.
	for _, tc := range []struct{ name, kubelet, want string }{
		{"none", "none", "may not evict pods (installed with kustodian-ctl install --kubelet-evictions)"},
		{"another node's", e.KubeletKubeconfig(spare), fmt.Sprintf("authenticates as %q, not as %q", "system:node:"+spare, "system:node:"+b)},
	} {
		agentB := newAgent(t, e, b, "--drain-kubelet-kubeconfig", tc.kubelet)
		agentB.request("upgrade")
		out, err := runOnce(agentB, nil)
		if err == nil {
			t.Fatalf("%s: the agent of %s started; output:\n%s", tc.name, b, out)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if !strings.Contains(lines[len(lines)-1], tc.want) {
			t.Errorf("%s: last line %q, want %q", tc.name, lines[len(lines)-1], tc.want)
		}
		if n := nodeObject(e, b); n.Spec.Unschedulable {
			t.Errorf("%s: the refused agent cordoned %s", tc.name, b)
		}
		if r, err := e.Client.CoordinationV1().Leases(e.Namespace).Get(e.Ctx, lock.RecordName(b), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s: the refused agent left a record: %v %v", tc.name, r, err)
		}
	}

	// A's agent drains A with its kubelet's identity; B's pods stay.
	agentA := newAgent(t, e, a, "--drain-kubelet-kubeconfig", e.KubeletKubeconfig(a))
	agentA.request("upgrade")
	agentA.start()
	agentA.waitInProgress(cluster.DefaultTimeout)
	if pods, err := podsOn(e.Ctx, e, a); err != nil || len(pods) != 0 {
		t.Errorf("pods left on the drained %s: %v %v", a, pods, err)
	}
	after, err := podsOn(e.Ctx, e, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range onB { // the spare or B may take web's replacements
		if !slices.Contains(after, pod) {
			t.Errorf("%s left %s during the drain of %s: %v → %v", pod, b, a, onB, after)
		}
	}
	e.RunningPods("web", 3)
	agentA.completes()
	log := agentA.logText()
	if !strings.Contains(log, "evicting with the kubelet's identity") || !strings.Contains(log, "system:node:"+a) {
		t.Errorf("the agent did not say it evicts as the kubelet:\n%s", log)
	}
	if strings.Contains(log, "forbidden") {
		t.Errorf("the agent met a forbidden request:\n%s", log)
	}
	// A says of itself that it is ready, for kustodian-ctl install.
	if got := nodeObject(e, a).Labels[nodemarks.LabelKubeletEvictions]; got != "ready" {
		t.Errorf("%s's label %s=%q, want ready", a, nodemarks.LabelKubeletEvictions, got)
	}
}

// A node may mark a Lease it writes (its record, a lock it creates to
// hold, a queue summary) only with a format the installation knows: an
// unknown one would keep every agent of the group out of its turn
// (docs/agent.md, "Upgrading the agents"). The values are those a node
// might try: a newer format, and spellings of 1 that Go's strconv reads as
// 1 but are not the annotation the agents write.
func TestSecurityANodeMarksLeasesOnlyWithKnownFormats(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	node := e.Nodes(1)[0]
	nodecreds.Install(e, e.Namespace)
	leases := clientFor(t, nodecreds.Kubeconfig(e, node)).CoordinationV1().Leases(e.Namespace)
	uid := nodeObject(e, node).UID
	owned := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: uid}}
	kinds := []struct {
		what  string
		lease func(format string) *coordv1.Lease
	}{
		{"its record", func(format string) *coordv1.Lease {
			return &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-" + node, Annotations: map[string]string{
				"kustodian.io/state": "Waiting", "kustodian.io/format": format}}, Spec: coordv1.LeaseSpec{HolderIdentity: &node}}
		}},
		{"a lock it holds", func(format string) *coordv1.Lease {
			return &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "lock-default-0", OwnerReferences: owned,
				Labels:      map[string]string{"kustodian.io/policy": "default"},
				Annotations: map[string]string{"kustodian.io/format": format}}, Spec: coordv1.LeaseSpec{HolderIdentity: &node}}
		}},
		{"a queue summary", func(format string) *coordv1.Lease {
			return &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "queue-default",
				Labels:      map[string]string{"kustodian.io/policy": "default"},
				Annotations: map[string]string{"kustodian.io/queue-by": node, "kustodian.io/format": format}}}
		}},
	}
	refused := func(err error) bool { return apierrors.IsInvalid(err) || apierrors.IsForbidden(err) }
	for _, k := range kinds {
		for _, bad := range []string{"2", "01", "+1", " 1", "1.0", ""} {
			_, err := leases.Create(e.Ctx, k.lease(bad), metav1.CreateOptions{})
			if !refused(err) {
				t.Errorf("creating %s in format %q: %v, want it refused", k.what, bad, err)
			} else if !strings.Contains(err.Error(), `only with a format this installation knows (1), not "`+bad+`"`) {
				t.Errorf("creating %s in format %q: the refusal does not say why: %v", k.what, bad, err)
			}
		}
		created, err := leases.Create(e.Ctx, k.lease("1"), metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("creating %s in format 1: %v", k.what, err)
		}
		created.Annotations["kustodian.io/format"] = "2"
		if _, err := leases.Update(e.Ctx, created, metav1.UpdateOptions{}); !refused(err) {
			t.Errorf("marking %s format 2: %v, want it refused", k.what, err)
		}
	}
}
