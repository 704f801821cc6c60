package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// A signed rollout that reboots, on a real systemd host with the .deb:
// the agent runs from boot (rollouts.enabled), takes the rollout, runs the
// script in a transient unit, reboots the host through logind when the
// script leaves the reboot sentinel (nspawn exits 133), starts again at
// the next boot, runs the script again as the job's contract says, and
// reports Succeeded in the rollout's status; the Node carries
// kustodian.io/rollouts=enabled.
func TestSignedRolloutThatReboots(t *testing.T) {
	e := cluster.New(t)
	h := newHost(t, e, 0)
	key := nodecreds.NewRolloutKey(t)
	h.runRollouts(key)
	script := filepath.Join(t.TempDir(), "kernel.sh")
	body := `#!/bin/sh
set -e
echo "run on $(hostname) in $(pwd)" >> /var/lib/kernel-runs
if [ ! -e /var/lib/kernel-installed ]; then
  touch /var/lib/kernel-installed
  touch /run/reboot-required
  echo "the new kernel needs a reboot"
fi
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	ctl := nodecreds.CtlFor(e)
	if out, err := ctl.Run(e.Ctx, "rollout", "create", "kernel", "--script", script, "--reboot", "auto", "--stage", "all",
		"-l", cluster.LabelTestEnv+"="+e.ID, "--key", key.Private); err != nil {
		t.Fatalf("rollout create: %v\n%s", err, out)
	}
	wctx, cancel := context.WithTimeout(e.Ctx, 2*cluster.DefaultTimeout)
	code, err := h.WaitExit(wctx)
	cancel()
	if err != nil || code != 133 {
		t.Fatalf("nspawn exited %d (%v), want 133: the rollout should have rebooted the host\n%s", code, err, h.Journal(e.Ctx, ""))
	}
	if err := h.Boot(e.Ctx); err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	var entry rollout.NodeStatus
	e.Eventually("the host's entry Succeeded after the reboot", 2*cluster.DefaultTimeout, func(ctx context.Context) error {
		u, err := dyn.Resource(rollout.GVR).Namespace(e.Namespace).Get(ctx, "kernel", metav1.GetOptions{})
		if err != nil {
			return err
		}
		r, err := rollout.FromUnstructured(u)
		if err != nil {
			return err
		}
		en := r.Entry(h.Name)
		if en == nil || en.State != rollout.Succeeded {
			return fmt.Errorf("entry %+v", en)
		}
		entry = *en
		return nil
	})
	if !strings.Contains(entry.Message, "(run 2): succeeded") {
		t.Errorf("the entry says %q, want the second run's success", entry.Message)
	}
	runs, err := os.ReadFile(filepath.Join(h.Dir, "var/lib/kernel-runs"))
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(runs)), "\n"); len(lines) != 2 || !strings.Contains(lines[0], "/var/lib/kustodian/rollouts/kernel-") {
		t.Errorf("the script's runs:\n%s", runs)
	}
	h.waitFor("the node given back", func() error {
		if h.exists("var/maintenance-required") || nodeUnschedulable(t, e, h.Name) || lockHolder(t, e) != "" {
			return fmt.Errorf("request %v, cordoned %v, lock held by %q", h.exists("var/maintenance-required"), nodeUnschedulable(t, e, h.Name), lockHolder(t, e))
		}
		return nil
	})
	if out := h.Journal(e.Ctx, ""); !strings.Contains(out, "the new kernel needs a reboot") {
		t.Errorf("the script's output is not in the journal")
	}
	out, err := ctl.Run(e.Ctx, "rollout", "status", "kernel")
	if err != nil || !strings.Contains(out, "Complete: 1 of 1 nodes succeeded") {
		t.Errorf("rollout status: %v\n%s", err, out)
	}
	t.Logf("kustodian-ctl rollout status kernel:\n%s", out)
}
