package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/lock/lockapi"
)

// An agent whose steps keep failing counts them in its metrics at once,
// and from the fifth in a row says so in its record and in an Event; the
// first step that succeeds clears the count.
func TestStuckAgentSaysSo(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 11, 25, 2, 0, 0, 0, time.UTC)
	clk := testingclock.NewFakeClock(now)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-1"}}
	kube := fake.NewClientset(node)
	cfg := config.Defaults()
	cfg.Namespace = "kustodian"
	cfg.StateDir = t.TempDir()
	textfile := filepath.Join(cfg.StateDir, "kustodian.prom")
	cfg.Metrics = config.Metrics{Textfile: textfile}
	a := New(Options{Config: cfg, NodeName: "n1", Kube: kube, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Notifier: noNotify{}, Clock: clk})
	if a.metrics.store == nil {
		t.Fatal("no metrics store")
	}
	locks := &lockapi.Client{Kube: kube, Namespace: cfg.Namespace, Now: a.now}
	rec, err := locks.PutRecord(ctx, nil, lock.Record{Node: "n1", State: lock.Waiting, Message: "waiting: joining the queue", Heartbeat: now})
	if err != nil {
		t.Fatal(err)
	}
	nodes, records := cache.NewStore(cache.MetaNamespaceKeyFunc), cache.NewStore(cache.MetaNamespaceKeyFunc)
	_ = nodes.Add(node)
	_ = records.Add(rec)
	a.useCaches(caches{groupLeases: cache.NewStore(cache.MetaNamespaceKeyFunc), ownRecord: records, node: nodes,
		control: cache.NewStore(cache.MetaNamespaceKeyFunc)})

	gauge := func(name string) string {
		b, err := os.ReadFile(textfile)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == name {
				return f[1]
			}
		}
		t.Fatalf("%s is not in the textfile:\n%s", name, b)
		return ""
	}
	events := func() []corev1.Event {
		l, err := kube.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	message := func() string {
		l, err := kube.CoordinationV1().Leases(cfg.Namespace).Get(ctx, lock.RecordName("n1"), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return lock.RecordFromLease(l).Message
	}

	fail := errors.New("the decision still needs {Queue:true} after looking it up")
	for i := 1; i < stuckAfter; i++ {
		a.stepFailed(ctx, fail)
		now = now.Add(time.Duration(i) * time.Second)
		clk.SetTime(now)
	}
	if got := gauge("kustodian_step_failures"); got != "4" {
		t.Errorf("kustodian_step_failures %s after 4 failures, want 4", got)
	}
	if got := gauge("kustodian_failing_since_timestamp_seconds"); got == "0" {
		t.Error("kustodian_failing_since_timestamp_seconds is 0 while failing")
	}
	if n := len(events()); n != 0 {
		t.Errorf("%d Events after 4 failures, want none yet", n)
	}
	if m := message(); m != "waiting: joining the queue" {
		t.Errorf("record message %q after 4 failures, want it unchanged", m)
	}

	a.stepFailed(ctx, fail)
	a.stepFailed(ctx, fail) // said once, not at every failure
	evs := events()
	if len(evs) != 1 || evs[0].Reason != ReasonMaintenanceStuck || evs[0].Type != corev1.EventTypeWarning ||
		!strings.Contains(evs[0].Message, fail.Error()) || evs[0].InvolvedObject.Name != "n1" {
		t.Errorf("Events after 6 failures: %+v, want one MaintenanceStuck Warning on n1 naming the error", evs)
	}
	if m := message(); !strings.HasPrefix(m, "stuck: 5 steps in a row failed since 2026-11-25T02:00:00Z") || !strings.Contains(m, fail.Error()) {
		t.Errorf("record message %q, want it to say the agent is stuck and why", m)
	}

	a.stepSucceeded()
	if got := gauge("kustodian_step_failures"); got != "0" {
		t.Errorf("kustodian_step_failures %s after a step succeeded, want 0", got)
	}
	if got := gauge("kustodian_failing_since_timestamp_seconds"); got != "0" {
		t.Errorf("kustodian_failing_since_timestamp_seconds %s after a step succeeded, want 0", got)
	}
}
