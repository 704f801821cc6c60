package lockapi

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kustodian/kustodian/internal/lock"
)

// A lock this build creates says its format; one in a newer format is not
// taken, however free it looks; a newer agent's record is neither read as
// a holder's nor put in a summary.
func TestNewerFormatsAreRefused(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	params := lock.Params{StaleAfter: time.Minute}
	noFacts := func(context.Context, string) (lock.HolderFacts, error) { return lock.HolderFacts{}, nil }
	newer := map[string]string{lock.AnnotationFormat: "2"}
	name := lock.DefaultGroup.LockName(0)

	c := &Client{Kube: fake.NewClientset(), Namespace: "k", Now: func() time.Time { return now }}
	l, v, err := c.Acquire(ctx, name, lock.DefaultGroup, "me", nil, params, noFacts)
	if err != nil || !v.Free || l.Annotations[lock.AnnotationFormat] != "1" {
		t.Fatalf("creating the lock: %v %+v %v", l, v, err)
	}

	free := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "k", ResourceVersion: "5", Annotations: newer}}
	c.Kube = fake.NewClientset(free)
	l, v, err = c.Acquire(ctx, name, lock.DefaultGroup, "me", nil, params, noFacts)
	if err != nil || l != nil || v.Free || !strings.Contains(v.Why, "is in format 2") {
		t.Errorf("a free lock in format 2: %v %+v %v, want it not taken, saying why", l, v, err)
	}
	if got, _ := c.Kube.CoordinationV1().Leases("k").Get(ctx, name, metav1.GetOptions{}); lock.Holder(got) != "" {
		t.Errorf("the lock in format 2 is held by %q", lock.Holder(got))
	}

	holder := "b"
	rec := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.RecordName("b"), Namespace: "k", Annotations: map[string]string{
		lock.AnnotationFormat: "2", lock.AnnotationState: string(lock.Waiting)}}, Spec: coordv1.LeaseSpec{HolderIdentity: &holder}}
	c.Kube = fake.NewClientset(rec)
	var fe *lock.FormatError
	if r, err := c.GetRecord(ctx, "b"); !errors.As(err, &fe) {
		t.Errorf("GetRecord of a record in format 2: %+v %v, want a FormatError", r, err)
	}
	if s, err := c.Summarize(ctx, lock.DefaultGroup, "me", time.Minute); !errors.As(err, &fe) {
		t.Errorf("Summarize with a record in format 2: %+v %v, want a FormatError", s, err)
	}
}

// A holder gives its lock back even when the queue summary it would write
// first cannot be made (a record of its group, or the queue Lease, in a
// newer format): the summary is left to the newer agents. A record in a
// newer format is not written over by an admin's release either.
func TestHandOffPastNewerFormats(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	me, b := "me", "b"
	held := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.DefaultGroup.LockName(0), Namespace: "k"}}
	lock.Take(held, lock.DefaultGroup, me, now, lock.Params{})
	newerRecord := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.RecordName(b), Namespace: "k", Annotations: map[string]string{
		lock.AnnotationFormat: "2", lock.AnnotationState: string(lock.Waiting)}}, Spec: coordv1.LeaseSpec{HolderIdentity: &b}}
	newerQueue := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.DefaultGroup.QueueName(), Namespace: "k", Annotations: map[string]string{
		lock.AnnotationFormat: "2", lock.AnnotationQueue: `{"nodes":["b"],"total":1,"listRV":"1"}`}}}
	for _, tc := range []struct {
		name  string
		newer *coordv1.Lease
	}{{"a newer record", newerRecord}, {"a newer queue Lease", newerQueue}} {
		c := &Client{Kube: fake.NewClientset(held.DeepCopy(), tc.newer.DeepCopy()), Namespace: "k", Now: func() time.Time { return now }}
		if _, err := c.HandOff(ctx, me, me, []*coordv1.Lease{held}, time.Minute); err != nil {
			t.Errorf("%s: HandOff: %v", tc.name, err)
		}
		got, err := c.Kube.CoordinationV1().Leases("k").Get(ctx, held.Name, metav1.GetOptions{})
		if err != nil || lock.Holder(got) != "" {
			t.Errorf("%s: the lock after HandOff: %v %v, want it free", tc.name, got, err)
		}
		if got, _ := c.Kube.CoordinationV1().Leases("k").Get(ctx, tc.newer.Name, metav1.GetOptions{}); got.Annotations[lock.AnnotationFormat] != "2" {
			t.Errorf("%s: written over: %v", tc.name, got.Annotations)
		}
	}

	held.Spec.HolderIdentity = &b
	c := &Client{Kube: fake.NewClientset(held, newerRecord), Namespace: "k", Now: func() time.Time { return now }}
	var fe *lock.FormatError
	if _, err := c.ReleaseByAdmin(ctx, b, "kustodian-ctl", time.Minute); !errors.As(err, &fe) {
		t.Errorf("an admin's release of a node whose record is in format 2: %v, want a FormatError", err)
	}
	if got, _ := c.Kube.CoordinationV1().Leases("k").Get(ctx, newerRecord.Name, metav1.GetOptions{}); got.Annotations[lock.AnnotationFormat] != "2" {
		t.Errorf("the record in format 2 was written over: %v", got.Annotations)
	}
}

// A lock in a newer format is neither released nor renewed, even by its
// holder's name: an admin's release of a newer agent's node whose record
// is gone leaves it as it is (found by a review).
func TestALockInANewerFormatIsNotWrittenOver(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	b := "b"
	held := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.DefaultGroup.LockName(0), Namespace: "k"}}
	lock.Take(held, lock.DefaultGroup, b, now, lock.Params{})
	held.Annotations[lock.AnnotationFormat] = "2"
	c := &Client{Kube: fake.NewClientset(held), Namespace: "k", Now: func() time.Time { return now }}
	var fe *lock.FormatError
	if _, err := c.ReleaseByAdmin(ctx, b, "kustodian-ctl", time.Minute); !errors.As(err, &fe) {
		t.Errorf("an admin's release of a lock in format 2 with no record: %v, want a FormatError", err)
	}
	if _, err := c.Renew(ctx, held.Name, b); !errors.As(err, &fe) {
		t.Errorf("renewing a lock in format 2: %v, want a FormatError", err)
	}
	got, err := c.Kube.CoordinationV1().Leases("k").Get(ctx, held.Name, metav1.GetOptions{})
	if err != nil || lock.Holder(got) != b || got.ResourceVersion != held.ResourceVersion {
		t.Errorf("the lock in format 2 was written over: %+v %v", got, err)
	}
}
