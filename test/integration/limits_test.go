package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/manifests"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// What a node writes into Leases is bounded: no finalizers, names only
// the protocol makes, no large objects, its queue key set by the API
// server's order.
func TestSecurityLeasesAreBounded(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	a := e.Nodes(1)[0]
	leasesA := clientFor(t, nodecreds.Kubeconfig(e, a)).CoordinationV1().Leases(e.Namespace)
	nodeA := nodeObject(e, a)
	owned := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: a, UID: nodeA.UID}}
	record := func(annotations map[string]string) *coordv1.Lease {
		return &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.RecordName(a), Annotations: annotations},
			Spec: coordv1.LeaseSpec{HolderIdentity: &a}}
	}
	heldLock := func(name string) *coordv1.Lease {
		return &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: owned, Labels: map[string]string{lock.LabelPolicy: "default"}},
			Spec: coordv1.LeaseSpec{HolderIdentity: &a}}
	}
	create := func(l *coordv1.Lease) error {
		_, err := leasesA.Create(e.Ctx, l, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}

	// Finalizers: a Lease that outlives its Node.
	withFinalizer := heldLock(lock.DefaultGroup.LockName(0))
	withFinalizer.Finalizers = []string{"example.com/keep"}
	denied(t, "a lock with a finalizer", create(withFinalizer), "node "+a+" may not put finalizers on Lease lock-default-0")
	rec := record(nil)
	rec.Finalizers = []string{"example.com/keep"}
	denied(t, "a record with a finalizer", create(rec), "may not put finalizers on Lease node-"+a)

	// Names: only lock-<policy>[-<group>]-<slot>.
	for _, name := range []string{"lock-junk-12345", "lock-x", "lock-default-1000"} {
		denied(t, "lock "+name, create(heldLock(name)), "lock names are lock-<policy>[-<group>]-<slot below 1000>, not "+name)
	}
	if err := create(heldLock(lock.GroupRef{Policy: "zones", Group: "eu-1"}.LockName(999))); err != nil {
		t.Errorf("a lock name the protocol makes: %v", err)
	}

	// Size: at most 16 KiB of annotations; labels only the protocol's.
	denied(t, "a 250 KB record", create(record(map[string]string{lock.AnnotationMessage: strings.Repeat("x", 250_000)})),
		"the annotations of Lease node-"+a+" come to 250020 bytes; at most 16384")
	big := heldLock(lock.DefaultGroup.LockName(0))
	big.Annotations = map[string]string{"kustodian.io/junk": strings.Repeat("x", 20_000)}
	denied(t, "a 20 KB lock", create(big), "come to 20017 bytes; at most 16384")
	labelled := record(nil)
	labelled.Labels = map[string]string{"example.com/x": "y"}
	denied(t, "a record with a foreign label", create(labelled), "may label Lease node-"+a+" only with app.kubernetes.io/managed-by, kustodian.io/policy")

	policyLabelled := record(nil)
	policyLabelled.Labels = map[string]string{lock.LabelPolicy: "default"}
	denied(t, "a record labelled as a lock (it would reach every agent)", create(policyLabelled), "may not carry the label "+lock.LabelPolicy)

	// Queue summaries: under its own name, holding nothing, owned by
	// nothing, never deleted; only the summary changes.
	queue := func(by string) *coordv1.Lease {
		return &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.DefaultGroup.QueueName(), Labels: map[string]string{lock.LabelPolicy: "default"},
			Annotations: map[string]string{lock.AnnotationQueue: `{"nodes":[],"total":0,"listRV":"1"}`, lock.AnnotationQueueBy: by}}}
	}
	denied(t, "a summary under another's name", create(queue("node-b")), "kustodian.io/queue-by must name its writer, "+a)
	heldQueue := queue(a)
	heldQueue.Spec.HolderIdentity = &a
	denied(t, "a queue with a holder", create(heldQueue), "may have neither a holder nor owners")
	ownedQueue := queue(a)
	ownedQueue.OwnerReferences = owned
	denied(t, "a queue with an owner", create(ownedQueue), "may have neither a holder nor owners")
	denied(t, "queue queue-a.b", create(&coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "queue-a.b", Annotations: queue(a).Annotations}}), "queue names are queue-<policy>[-<group>]")
	q, err := leasesA.Create(e.Ctx, queue(a), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a node writing its group's summary: %v", err)
	}
	q.Annotations["kustodian.io/junk"] = "x"
	_, err = leasesA.Update(e.Ctx, q, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	denied(t, "another annotation on a queue", err, "may change only the annotations kustodian.io/queue and kustodian.io/queue-by of queue queue-default")
	denied(t, "delete a queue", leasesA.Delete(e.Ctx, q.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}), "may not delete queue queue-default")

	// 16 KiB are bytes, not characters.
	denied(t, "a record of 16384 four-byte characters", create(record(map[string]string{lock.AnnotationMessage: strings.Repeat("😀", 16000)})),
		"bytes; at most 16384")
	// Owners: its own Node only, as v1.
	foreign := record(nil)
	foreign.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "ghost", UID: "0f0f0f0f-0000-0000-0000-000000000000"}}
	denied(t, "a record owned by a Node that does not exist", create(foreign), "may be owned only by Node "+a)
	v2 := heldLock(lock.DefaultGroup.LockName(0))
	v2.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v2", Kind: "Node", Name: a, UID: nodeA.UID}}
	denied(t, "a lock owned by its Node as v2", create(v2), "may be owned only by Node "+a+" (v1")
	// A lock is created only to be held, and a free one only taken as it is.
	free := heldLock(lock.GroupRef{Policy: "free"}.LockName(0))
	free.Spec.HolderIdentity, free.OwnerReferences = nil, nil
	denied(t, "create a free lock", create(free), "may create lock lock-free-0 only to hold it")
	lockName := lock.GroupRef{Policy: "mine"}.LockName(0)
	held, err := leasesA.Create(e.Ctx, heldLock(lockName), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating a lock to hold it: %v", err)
	}
	update := func(l *coordv1.Lease) (*coordv1.Lease, error) {
		return leasesA.Update(e.Ctx, l, metav1.UpdateOptions{})
	}
	regrouped := held.DeepCopy()
	regrouped.Annotations = map[string]string{lock.AnnotationGroup: "elsewhere"}
	_, err = leasesA.Update(e.Ctx, regrouped, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	denied(t, "move a held lock to another group", err, "may not change the group (annotation "+lock.AnnotationGroup+") of lock "+lockName)
	giveBack := held.DeepCopy()
	empty := ""
	giveBack.Spec.HolderIdentity, giveBack.OwnerReferences = &empty, nil
	giveBack.Annotations = map[string]string{lock.AnnotationDisrupted: "apps/Deployment/x/never"}
	_, err = update(giveBack)
	denied(t, "give a lock back changing its disrupted workloads", err, "changing only its annotation "+lock.AnnotationReleasedAt)
	giveBack.Annotations = map[string]string{lock.AnnotationReleasedAt: time.Now().UTC().Format(time.RFC3339Nano)}
	released, err := update(giveBack)
	if err != nil {
		t.Fatalf("giving a lock back as agents do: %v", err)
	}
	spaced := released.DeepCopy()
	spaced.Annotations[lock.AnnotationReleasedAt] = "2999-01-01T00:00:00Z"
	_, err = update(spaced)
	denied(t, "move a free lock's release into 2999", err, "lock "+lockName+" is free; node "+a+" may take it, not change it")
	relabelled := released.DeepCopy()
	relabelled.Labels[lock.LabelPolicy] = "bogus"
	relabelled.Spec.HolderIdentity, relabelled.OwnerReferences = &a, owned
	_, err = update(relabelled)
	denied(t, "take a lock changing its policy label", err, "may not change the labels of lock "+lockName)
	takeChanged := released.DeepCopy()
	takeChanged.Spec.HolderIdentity, takeChanged.OwnerReferences = &a, owned
	delete(takeChanged.Annotations, lock.AnnotationReleasedAt)
	_, err = update(takeChanged)
	denied(t, "take a lock dropping its release time", err, "may take lock "+lockName+" only as it is")

	// The queue key: never chosen by the node.
	denied(t, "a new record with its own queue key", create(record(map[string]string{lock.AnnotationQueueKey: "1"})),
		"kustodian.io/queue-key is the resourceVersion of the record's creation")
	created, err := leasesA.Create(e.Ctx, record(nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	forged := created.DeepCopy()
	forged.Annotations = map[string]string{lock.AnnotationQueueKey: "1"}
	_, err = leasesA.Update(e.Ctx, forged, metav1.UpdateOptions{})
	denied(t, "a forged queue key", err, "it may be set once to "+created.ResourceVersion+", not to 1")
	honest := created.DeepCopy()
	honest.Annotations = map[string]string{lock.AnnotationQueueKey: created.ResourceVersion}
	stored, err := leasesA.Update(e.Ctx, honest, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("storing the queue key as agents do: %v", err)
	}
	moved := stored.DeepCopy()
	moved.Annotations[lock.AnnotationQueueKey] = "1"
	_, err = leasesA.Update(e.Ctx, moved, metav1.UpdateOptions{})
	denied(t, "moving a stored queue key", err, "kustodian.io/queue-key is the resourceVersion of the record's creation")
}

// What the agents' credentials may cost is bounded: their requests go to a
// priority level of their own, and the namespace's Leases have a quota.
func TestSecurityAPILimits(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	a := e.Nodes(1)[0]
	kubeconfig := nodecreds.Kubeconfig(e, a)
	name := manifests.AgentServiceAccount + "-" + e.Namespace
	fs, err := e.Client.FlowcontrolV1().FlowSchemas().Get(e.Ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The API server says which FlowSchema classified each request.
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(rc.Host + "/api/v1/nodes/" + a)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Kubernetes-Pf-Flowschema-Uid"); got != string(fs.UID) {
		t.Errorf("the agent's request went to FlowSchema %q, want %s (%s)", got, name, fs.UID)
	}

	// The quota: with room for three Leases, a node's fourth is refused.
	mustCtl(t, e, "install", "--kured-namespace", e.Namespace, "--max-leases", "3")
	leasesA := clientFor(t, kubeconfig).CoordinationV1().Leases(e.Namespace)
	owned := []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: a, UID: nodeObject(e, a).UID}}
	var last error
	for slot := 0; slot < 4; slot++ {
		name := lock.GroupRef{Policy: "p" + fmt.Sprint(slot)}.LockName(0)
		_, last = leasesA.Create(e.Ctx, &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: owned, Labels: map[string]string{lock.LabelPolicy: "p"}},
			Spec: coordv1.LeaseSpec{HolderIdentity: &a}}, metav1.CreateOptions{})
		if slot < 3 && last != nil {
			t.Fatalf("lease %d of 3: %v", slot+1, last)
		}
	}
	if !apierrors.IsForbidden(last) || !strings.Contains(last.Error(), "exceeded quota: kustodian-leases") {
		t.Errorf("the fourth Lease: %v, want it refused by the quota", last)
	}
}
