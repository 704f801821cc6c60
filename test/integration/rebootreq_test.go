package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/cluster"
)

// A host whose reboot sentinel exists: without triggers.rebootRequired the
// agent asks for nothing; with it, the agent asks for a maintenance whose
// job is the reboot, naming the packages, and takes it through the queue
// (here the reboot cannot be made: no logind, so the job fails there, with
// the node cordoned and the lock held). Once withdrawn, it is not asked
// for again in the same boot. The real reboot is the e2e test's.
func TestAgentAsksForAReboot(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(1)
	a := newAgent(t, e, nodes[0])
	if err := os.WriteFile(a.spec.RebootSentinel(), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(a.spec.RebootSentinel()+".pkgs", []byte("linux-image-6.1.0-28-amd64\nlibc6\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.start()
	a.exitsZero()
	if _, err := os.Stat(a.requestFile()); !os.IsNotExist(err) {
		t.Fatalf("a reboot was asked for without triggers.rebootRequired (%v)", err)
	}

	if err := e.ApplyPolicy(`{metadata: {name: reboots}, spec: {triggers: {rebootRequired: true}}}`); err != nil {
		t.Fatal(err)
	}
	a.start()
	const reason = "reboot required: packages linux-image-6.1.0-28-amd64, libc6"
	waitRecord(e, nodes[0], "Failed at the reboot it asked for", func(r *lock.Record) error {
		if err := inStateSaying(lock.Failed, "a reboot is pending but logind cannot be reached to reboot")(r); err != nil {
			return err
		}
		if r.Reason != reason {
			return fmt.Errorf("reason %q, want %q", r.Reason, reason)
		}
		return nil
	})
	eventSays(e, nodes[0], "RebootRequested", "asked for a reboot (policy reboots, triggers.rebootRequired): packages linux-image-6.1.0-28-amd64, libc6")
	if groupLockHolder(e, lock.GroupRef{Policy: "reboots"}) != nodes[0] || !nodeObject(e, nodes[0]).Spec.Unschedulable {
		t.Fatalf("after the failed reboot: lock %q, cordoned %v", groupLockHolder(e, lock.GroupRef{Policy: "reboots"}), nodeObject(e, nodes[0]).Spec.Unschedulable)
	}
	jobs, err := filepath.Glob(filepath.Join(a.spec.StateDir(), "jobs", "reboot-required-*.json"))
	if err != nil || len(jobs) != 1 {
		t.Fatalf("reboot jobs %v (%v), want one", jobs, err)
	}

	// The operator withdraws it: the node is given back, and the agent,
	// in the same boot, does not ask again.
	a.finish()
	a.exitsZero()
	if _, err := os.Stat(a.requestFile()); !os.IsNotExist(err) {
		b, _ := os.ReadFile(a.requestFile())
		t.Fatalf("asked again in the same boot: %s", strings.TrimSpace(string(b)))
	}
	if groupLockHolder(e, lock.GroupRef{Policy: "reboots"}) != "" || nodeObject(e, nodes[0]).Spec.Unschedulable {
		t.Fatalf("not given back: lock %q, cordoned %v", groupLockHolder(e, lock.GroupRef{Policy: "reboots"}), nodeObject(e, nodes[0]).Spec.Unschedulable)
	}
}
