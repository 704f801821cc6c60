package agent

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/lock"
)

// A node that makes its queue's summary again and finds a record of its
// group in a newer format keeps out of its turn and says why, as when it
// joined the queue: it does not take the failed summary for another
// node's and try again and again (found by a review).
func TestASummaryBlockedByANewerRecordKeepsTheNodeOut(t *testing.T) {
	now := time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)
	cfg := config.Defaults()
	cfg.StateDir = t.TempDir()
	newer := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "node-b", Namespace: cfg.Namespace, Annotations: map[string]string{
		"kustodian.io/format": "2", "kustodian.io/state": "Waiting", "kustodian.io/policy": "default"}}}
	a := New(Options{Config: cfg, NodeName: "n1", Kube: fake.NewClientset(newer), Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Notifier: noNotify{}, Clock: testingclock.NewFakeClock(now)})
	a.locks.view = newLeaseView(cfg.Namespace) // no informers: only its own writes
	if err := a.renominate(context.Background(), lock.DefaultGroup, false); err != nil {
		t.Fatalf("renominate: %v", err)
	}
	u := a.queue.unreadable
	if u == nil || u.lease != "node-b" || u.group != lock.DefaultGroup || !strings.Contains(u.why, "upgrade kustodian on this node") {
		t.Fatalf("after a summary refused for node-b's format: unreadable %+v, want node-b's, saying to upgrade", u)
	}
	if a.queue.mine != nil {
		t.Errorf("a summary was kept: %+v", a.queue.mine)
	}
}

// A node blocked by a record of its group that moves to another group (its
// labels or the policies changed) is no longer kept out by that record,
// and lists its new group's queue, not the old one's, when it joins it.
func TestARecordOfTheGroupLeftNoLongerBlocks(t *testing.T) {
	now := time.Date(2026, 12, 6, 2, 0, 0, 0, time.UTC)
	cfg := config.Defaults()
	cfg.StateDir = t.TempDir()
	kube := fake.NewClientset()
	a := New(Options{Config: cfg, NodeName: "n1", Kube: kube, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Notifier: noNotify{}, Clock: testingclock.NewFakeClock(now.Add(time.Hour))})
	a.queue.unreadable = &unreadableRecord{lease: "node-b", why: "node-b is in format 2", group: lock.DefaultGroup, at: now}
	a.decision.Group = lock.GroupRef{Policy: "racks", Group: "rack-2"}
	if err := a.listAgain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a.queue.unreadable != nil {
		t.Errorf("unreadable %+v after the node moved to %s", a.queue.unreadable, a.decision.Group)
	}
	if n := len(kube.Actions()); n != 0 {
		t.Errorf("%d requests (%v): the old group was listed again", n, kube.Actions())
	}
}
