package e2e

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/test/judge"
)

// The host reboots in the middle of a drain (a PDB holds it up): the lock
// and the cordon stay across the reboot, the agent drains again after the
// boot, and the maintenance completes; the independent judge finds every
// step allowed and no PDB broken.
func TestFaultRebootMidDrain(t *testing.T) {
	t.Parallel()
	e, h, spare := hostWithBlockedDrain(t)
	j, err := judge.Watch(e.Ctx, e.Client, e.Namespace, e.Namespace, judge.Rules{AdminCordoned: map[string]bool{spare: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the judge's history:\n%s", j.History())
		}
	})
	h.pathUnitReady()
	h.run("touch", "/var/maintenance-required")
	h.waitFor("a drain blocked by the PDB", h.drainBlockedByPDB)

	// root's systemctl reboot without a TTY does not wait for the block
	// inhibitor (systemd 252): the host goes down mid-drain.
	_, _ = h.Exec(e.Ctx, "systemctl", "reboot")
	code, err := h.WaitExit(e.Ctx)
	if err != nil || code != 133 {
		t.Fatalf("nspawn exited %d (%v), want 133 for a reboot", code, err)
	}
	if got := lockHolder(t, e); got != h.Name {
		t.Fatalf("after the reboot the lock is held by %q, want %s", got, h.Name)
	}
	if n, err := e.Client.CoreV1().Nodes().Get(e.Ctx, h.Name, metav1.GetOptions{}); err != nil || !n.Spec.Unschedulable {
		t.Fatalf("after the reboot %s is not cordoned (%v)", h.Name, err)
	}
	if err := h.Boot(e.Ctx); err != nil {
		t.Fatal(err)
	}
	h.waitFor("draining again after the boot", h.drainBlockedByPDB)
	uncordon(e, spare)
	h.waitFor("the go-ahead", func() error {
		if !h.exists("var/maintenance-in-progress") {
			return fmt.Errorf("no in-progress file")
		}
		return nil
	})
	h.scriptDone()
	if err := j.Verdict(e.Ctx, []string{h.Name, spare}); err != nil {
		t.Errorf("the judge found:\n%v", err)
	}
}
