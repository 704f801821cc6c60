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
