//go:build bench

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/cordons"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// A benchmark (make bench-reboots), not a test of make test: the same five
// real systemd hosts all need a reboot (/run/reboot-required), and are
// rebooted first by Kured's own binary (a unit on each host, as its pod:
// --period=1m, its real reboot), then by Kustodian (triggers.rebootRequired,
// concurrency 1). It prints each rollout's makespan, from the sentinels
// written to every node back, uncordoned, with no lock held; an
// independent recorder of the Nodes' cordons checks that neither ever
// had two nodes cordoned at once.
func TestRebootRolloutSideBySide(t *testing.T) {
	const n = 5
	e := cluster.New(t)
	nodecreds.Install(e, e.Namespace)
	e.KuredDaemonSet(e.Namespace, "")
	var hosts []*host
	var names []string
	var kureds []*kuredOnHost
	for i := range n {
		h := newHost(t, e, i)
		h.run("sh", "-c", "printf 'kured:\\n  namespace: "+e.Namespace+"\\n' >> /etc/kustodian/config.yaml")
		t.Cleanup(h.KeepBooting(t.Logf))
		hosts, names = append(hosts, h), append(names, h.Name)
		kureds = append(kureds, newKuredOnHost(t, e, h, e.Namespace, "--period=1m"))
	}
	rec := cordons.Record(t, e, names)
	needReboot := func() {
		for _, h := range hosts {
			h.run("sh", "-c", "echo '*** System restart required ***' > /run/reboot-required")
		}
	}
	// done: every host booted once more since boots, none cordoned, no
	// lock of either tool held, no Kustodian record left.
	done := func(boots []int) error {
		for i, h := range hosts {
			if h.Boots() <= boots[i] {
				return fmt.Errorf("%s not rebooted yet", h.Name)
			}
			if nodeUnschedulable(t, e, h.Name) {
				return fmt.Errorf("%s cordoned", h.Name)
			}
			if _, err := e.Client.CoordinationV1().Leases(e.Namespace).Get(e.Ctx, lock.RecordName(h.Name), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s has a record (%v)", h.Name, err)
			}
		}
		if holders := kuredHolders(t, e, e.Namespace, "weave.works/kured-node-lock"); len(holders) > 0 {
			return fmt.Errorf("Kured's lock held by %v", holders)
		}
		if h := policyLockHolder(t, e, "reboots"); h != "" {
			return fmt.Errorf("Kustodian's lock held by %s", h)
		}
		return nil
	}
	boots := func() []int {
		var b []int
		for _, h := range hosts {
			b = append(b, h.Boots())
		}
		return b
	}

	// Kured.
	before := boots()
	start := time.Now()
	needReboot()
	for _, k := range kureds {
		k.h.run("systemctl", "enable", "--now", "kured")
	}
	e.Eventually("Kured to reboot every host", 30*time.Minute, func(context.Context) error { return done(before) })
	kuredTime := time.Since(start)
	for _, k := range kureds {
		k.h.run("systemctl", "disable", "--now", "kured")
	}

	// Kustodian.
	if err := e.ApplyPolicy(`{metadata: {name: reboots}, spec: {triggers: {rebootRequired: true}}}`); err != nil {
		t.Fatal(err)
	}
	before = boots()
	start = time.Now()
	needReboot()
	e.Eventually("Kustodian to reboot every host", 10*time.Minute, func(context.Context) error { return done(before) })
	kustodianTime := time.Since(start)

	rec.Check(t, 1)
	fmt.Printf("reboot rollout of %d hosts, one at a time, from the sentinels written to every node back:\n", n)
	fmt.Printf("  Kured 51220cc (--period=1m): %s\n", kuredTime.Round(time.Second))
	fmt.Printf("  Kustodian (triggers.rebootRequired): %s\n", kustodianTime.Round(time.Second))
	fmt.Printf("  most nodes cordoned at once: %d\n", len(rec.Most()))
}
