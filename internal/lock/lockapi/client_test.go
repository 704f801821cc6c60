package lockapi

import (
	"context"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kustodian/kustodian/internal/lock"
)

// Of two agents racing for a lock exactly one wins: the loser of the
// create (409 AlreadyExists) or of the update (409 Conflict) gets no Lease,
// a verdict that says it lost, and no error, so that it reads again and
// decides again.
func TestAcquireLosesRacesWithoutError(t *testing.T) {
	ctx := context.Background()
	name := lock.DefaultGroup.LockName(0)
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	params := lock.Params{StaleAfter: time.Minute}
	noFacts := func(context.Context, string) (lock.HolderFacts, error) {
		return lock.HolderFacts{NodeExists: true}, nil
	}

	// The create: someone else created the lock after our read.
	kube := fake.NewClientset()
	kube.PrependReactor("create", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewAlreadyExists(coordv1.Resource("leases"), name)
	})
	c := &Client{Kube: kube, Namespace: "k", Now: func() time.Time { return now }}
	l, v, err := c.Acquire(ctx, name, lock.DefaultGroup, "me", nil, params, noFacts)
	if err != nil || l != nil || v.Free || !strings.Contains(v.Why, "lost the race to create") {
		t.Errorf("lost create: %v %+v %v", l, v, err)
	}

	// The update: the lock was free when read, and written meanwhile.
	free := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "k", ResourceVersion: "5"}}
	kube = fake.NewClientset(free)
	kube.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewConflict(coordv1.Resource("leases"), name, nil)
	})
	c.Kube = kube
	l, v, err = c.Acquire(ctx, name, lock.DefaultGroup, "me", free, params, noFacts)
	if err != nil || l != nil || v.Free || !strings.Contains(v.Why, "lost the race for") {
		t.Errorf("lost update: %v %+v %v", l, v, err)
	}

	// Any other error is one: the caller backs off.
	kube = fake.NewClientset(free)
	kube.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(coordv1.Resource("leases"), name, nil)
	})
	c.Kube = kube
	if l, _, err := c.Acquire(ctx, name, lock.DefaultGroup, "me", free, params, noFacts); err == nil || l != nil {
		t.Errorf("forbidden update: %v %v, want an error", l, err)
	}
}

// A lock that is not free, or that belongs to another group under the same
// name, is not taken, and nothing is written.
func TestAcquireRefusesWithoutWriting(t *testing.T) {
	ctx := context.Background()
	name := lock.DefaultGroup.LockName(0)
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	holder := "other"
	held := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "k", ResourceVersion: "5"},
		Spec: coordv1.LeaseSpec{HolderIdentity: &holder}}
	kube := fake.NewClientset(held)
	c := &Client{Kube: kube, Namespace: "k", Now: func() time.Time { return now }}
	kube.ClearActions()
	alive := func(context.Context, string) (lock.HolderFacts, error) {
		return lock.HolderFacts{NodeExists: true}, nil
	}
	l, v, err := c.Acquire(ctx, name, lock.DefaultGroup, "me", held, lock.Params{StaleAfter: time.Minute}, alive)
	if err != nil || l != nil || v.Free || v.Why != "held by other" {
		t.Errorf("a held lock: %v %+v %v", l, v, err)
	}

	empty := ""
	other := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "k", ResourceVersion: "6",
		Labels: map[string]string{lock.LabelPolicy: "zones"}, Annotations: map[string]string{lock.AnnotationGroup: "a"}},
		Spec: coordv1.LeaseSpec{HolderIdentity: &empty}}
	l, v, err = c.Acquire(ctx, name, lock.DefaultGroup, "me", other, lock.Params{StaleAfter: time.Minute}, alive)
	if err != nil || l != nil || !strings.Contains(v.Why, "belongs to group zones/a") {
		t.Errorf("another group's lock: %v %+v %v", l, v, err)
	}
	for _, a := range kube.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("a refused Acquire wrote: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}
