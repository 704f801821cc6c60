package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/cluster"
)

// A host whose packages want a reboot (Debian's /run/reboot-required and
// reboot-required.pkgs), under a policy with triggers.rebootRequired, and
// no maintenance script: the path unit starts the agent, which asks for
// the reboot itself, naming the packages; it waits its turn behind a node
// in maintenance, is drained, reboots keeping the lock, and after the boot
// gives the node back. The same host without the trigger asks for nothing.
func TestRebootRequiredThroughTheQueue(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	h := newHost(t, e, 0)
	h.pathUnitReady()
	tl := recordTimeline(t, e)
	needReboot := func() {
		h.run("sh", "-c", "printf 'linux-image-6.1.0-28-amd64\\nlibc6\\nlinux-image-6.1.0-28-amd64\\n' > /run/reboot-required.pkgs && "+
			"echo '*** System restart required ***' > /run/reboot-required")
	}

	// needRebootAndWait writes the sentinel and waits for the agent it
	// starts (PathChanged=) to run and exit.
	needRebootAndWait := func() {
		started := h.property("kustodian.service", "ExecMainStartTimestampMonotonic")
		needReboot()
		h.waitFor("the agent to start and exit", func() error {
			if h.property("kustodian.service", "ExecMainStartTimestampMonotonic") == started || h.property("kustodian.service", "ActiveState") != "inactive" {
				return fmt.Errorf("service %s", h.property("kustodian.service", "ActiveState"))
			}
			return nil
		})
	}

	// Without the trigger (the built-in policy): the agent starts, asks
	// for nothing and exits.
	needRebootAndWait()
	if h.exists("var/maintenance-required") {
		t.Fatal("a reboot was asked for without the policy's triggers.rebootRequired")
	}

	// With it, behind a node in maintenance.
	if err := e.ApplyPolicy(`{metadata: {name: reboots}, spec: {triggers: {rebootRequired: true}}}`); err != nil {
		t.Fatal(err)
	}
	waiter := newWaitingAgent(t, e)
	waiter.request()
	waiter.waitInProgress(e)
	needReboot() // written again: PathChanged= starts the agent
	h.waitFor("the agent to ask for the reboot and wait its turn", func() error {
		l, err := e.Client.CoordinationV1().Leases(e.Namespace).Get(e.Ctx, lock.RecordName(h.Name), metav1.GetOptions{})
		if err != nil {
			return err
		}
		r := lock.RecordFromLease(l)
		if r.State != lock.Waiting || r.Reason != "reboot required: packages linux-image-6.1.0-28-amd64, libc6" {
			return fmt.Errorf("record %s, reason %q", r.State, r.Reason)
		}
		return nil
	})
	if err := os.Remove(waiter.spec.RequestFile()); err != nil {
		t.Fatal(err)
	}

	wctx, cancel := context.WithTimeout(e.Ctx, 2*cluster.DefaultTimeout)
	code, err := h.WaitExit(wctx)
	cancel()
	if err != nil || code != 133 {
		t.Fatalf("nspawn exited %d (%v), want 133: the host should have rebooted\n%s", code, err, h.Journal(e.Ctx, ""))
	}
	if got := policyLockHolder(t, e, "reboots"); got != h.Name {
		t.Fatalf("the lock is held by %q during the reboot, want %s", got, h.Name)
	}
	if !nodeUnschedulable(t, e, h.Name) {
		t.Fatal("the node is not cordoned during its reboot")
	}
	if err := h.Boot(e.Ctx); err != nil {
		t.Fatal(err)
	}
	e.Eventually(h.Name+" given back after the boot", 2*cluster.DefaultTimeout, func(context.Context) error {
		_, err := e.Client.CoordinationV1().Leases(e.Namespace).Get(e.Ctx, lock.RecordName(h.Name), metav1.GetOptions{})
		switch {
		case err == nil:
			return fmt.Errorf("%s is %s", h.Name, tl.State(h.Name))
		case !apierrors.IsNotFound(err):
			return err
		case nodeUnschedulable(t, e, h.Name):
			return fmt.Errorf("%s is still cordoned", h.Name)
		case policyLockHolder(t, e, "reboots") != "":
			return fmt.Errorf("the lock is held by %s", policyLockHolder(t, e, "reboots"))
		}
		return nil
	})
	jobs, err := filepath.Glob(filepath.Join(h.Dir, "var/lib/kustodian/jobs/reboot-required-*.json"))
	if err != nil || len(jobs) != 1 {
		t.Fatalf("reboot jobs %v (%v), want one", jobs, err)
	}
	job, err := os.ReadFile(jobs[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(job), `"state": "succeeded"`) || !strings.Contains(string(job), `"runs": 2`) {
		t.Errorf("job record:\n%s", job)
	}
	if h.exists("var/maintenance-required") {
		t.Error("the request is still there")
	}
	if out, err := h.Exec(e.Ctx, "test", "-e", "/run/reboot-required"); err == nil {
		t.Errorf("the reboot sentinel is still there after the boot (%s)", out)
	}
	if err := tl.CheckExclusive(1); err != nil {
		t.Fatalf("%v\n%s", err, tl)
	}
	saw := false
	for _, tr := range tl.Transitions() {
		saw = saw || (tr.Node == h.Name && tr.State == lock.Rebooting)
	}
	if !saw {
		t.Errorf("Rebooting was never recorded:\n%s", tl)
	}
	evs, err := e.Client.CoreV1().Events(metav1.NamespaceDefault).List(e.Ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + h.Name + ",reason=RebootRequested"})
	if err != nil || len(evs.Items) != 1 || !strings.Contains(evs.Items[0].Message, "asked for a reboot (policy reboots, triggers.rebootRequired): packages linux-image-6.1.0-28-amd64, libc6") {
		t.Errorf("RebootRequested Events: %v %v", evs, err)
	}
	t.Logf("timeline:\n%s", tl)

	// In the new boot the host needs a reboot again and asks; an admin
	// withdraws the request while it waits: its job is ended (not left as
	// the job of the next request), and the agent does not ask again in
	// this boot.
	waiter.request()
	waiter.waitInProgress(e)
	needReboot()
	h.waitFor("the agent to ask again in the new boot", func() error {
		if !h.exists("var/maintenance-required") {
			return fmt.Errorf("no request")
		}
		return nil
	})
	h.run("rm", "/var/maintenance-required")
	h.waitFor("the withdrawn request to be let go", func() error {
		if s := h.property("kustodian.service", "ActiveState"); s != "inactive" {
			return fmt.Errorf("service %s", s)
		}
		return nil
	})
	if h.exists("var/lib/kustodian/jobs/current") {
		b, _ := os.ReadFile(filepath.Join(h.Dir, "var/lib/kustodian/jobs/current"))
		t.Fatalf("the withdrawn reboot job is still current: %s", b)
	}
	needRebootAndWait()
	if h.exists("var/maintenance-required") {
		t.Fatal("asked again in the boot where its request was withdrawn")
	}
}
