package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/kustodian/kustodian/internal/history"
	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// runRollouts makes the host's agent run rollouts signed by key, from
// boot, as docs/rollout.md says, and waits for its Node's label.
func (h *host) runRollouts(key nodecreds.RolloutKey) {
	h.t.Helper()
	writeFile(h.t, filepath.Join(h.Dir, "etc/kustodian/rollout-keys"), key.Public, 0o644)
	conf, err := os.ReadFile(filepath.Join(h.Dir, "etc/kustodian/config.yaml"))
	if err != nil {
		h.t.Fatal(err)
	}
	writeFile(h.t, filepath.Join(h.Dir, "etc/kustodian/config.yaml"), append(conf, "rollouts:\n  enabled: true\n"...), 0o644)
	h.run("systemctl", "add-wants", "multi-user.target", "kustodian.service")
	h.run("systemctl", "start", "kustodian.service")
	h.waitFor("the Node labelled as running rollouts", func() error {
		n, err := h.e.Client.CoreV1().Nodes().Get(h.e.Ctx, h.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if n.Labels[rollout.LabelRollouts] != "enabled" {
			return fmt.Errorf("labels %v", n.Labels)
		}
		return nil
	})
}

// readRollout reads a rollout as the API server has it; an error of the
// API server fails the wait it is in, not the test.
func readRollout(ctx context.Context, dyn dynamic.Interface, ns, name string) (*rollout.MaintenanceRollout, error) {
	u, err := dyn.Resource(rollout.GVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return rollout.FromUnstructured(u)
}

// A patch campaign through the queue, on three real hosts with real apt
// and the agent from the .deb: the first host the campaign reaches
// resolves and installs v2 of a test package (and the library it needs)
// from a signed repository on loopback, alone; v3 is published before
// the campaign goes on, and the other hosts install exactly v2; each
// node's entry says what it changed. A campaign of a package that needs a
// reboot reboots its canary (through the agent, the lock kept) and gives
// it back after the boot. A campaign whose v4 fails in its postinst is
// rolled back to v2 on its first host, which is held, and stops there: no
// other host is touched.
func TestPatchCampaignInstallsTheCanarysSetAcrossTheFleet(t *testing.T) {
	e := cluster.New(t)
	key := nodecreds.NewRolloutKey(t)
	debs := t.TempDir()
	app := func(v string, failing bool) string {
		return testDeb(t, debs, "kpt-app", v, "kpt-lib (>= "+min(v, "2")+")", failing)
	}
	lib := func(v string) string { return testDeb(t, debs, "kpt-lib", v, "", false) }
	app1, app2, app3, app4 := app("1", false), app("2", false), app("3", false), app("4", true)
	lib1, lib2 := lib("1"), lib("2")
	// A package whose v2 needs a reboot (its postinst leaves Debian's
	// sentinel, as a kernel's does).
	rb1, rb2 := testDebWith(t, debs, "kpt-rb", "1", "", ""), testDebWith(t, debs, "kpt-rb", "2", "", "#!/bin/sh\ntouch /run/reboot-required\n")
	repo := newFlatRepo(t)
	repo.publish(app1, lib1, rb1)
	var hosts []*host
	for i := range 3 {
		h := newHost(t, e, i)
		repo.trust(h)
		for _, args := range [][]string{{"update"}, {"install", "kpt-app", "kpt-rb"}} {
			if out, err := h.apt(args...); err != nil {
				t.Fatalf("%s: apt-get %s: %v\n%s", h.Name, strings.Join(args, " "), err, out)
			}
		}
		h.runRollouts(key)
		hosts = append(hosts, h)
	}
	versions := func(h *host) string { return h.version("kpt-app") + "/" + h.version("kpt-lib") }
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctl := nodecreds.CtlFor(e)
	create := func(name, include string) time.Time {
		t.Helper()
		if out, err := ctl.Run(e.Ctx, "rollout", "create", name, "--patch", "all", "--include", include, "--stage", "1", "--stage", "all",
			"-l", cluster.LabelTestEnv+"="+e.ID, "--key", key.Private); err != nil {
			t.Fatalf("rollout create %s: %v\n%s", name, err, out)
		}
		return time.Now()
	}
	// settled waits until entries of the rollout are in a final state,
	// in number, and returns the rollout then.
	settled := func(name string, n int, final ...string) *rollout.MaintenanceRollout {
		t.Helper()
		var r *rollout.MaintenanceRollout
		e.Eventually(fmt.Sprintf("%d entries of %s %v", n, name, final), 3*cluster.DefaultTimeout, func(ctx context.Context) error {
			var err error
			if r, err = readRollout(ctx, dyn, e.Namespace, name); err != nil {
				return err
			}
			var done []string
			for _, en := range r.Status.Nodes {
				if slices.Contains(final, en.State) {
					done = append(done, en.Name)
				}
			}
			if len(done) < n {
				return fmt.Errorf("entries %+v", r.Status.Nodes)
			}
			return nil
		})
		return r
	}
	// conditionTrue waits until the rollout's condition kind is true.
	conditionTrue := func(name, kind string) {
		t.Helper()
		e.Eventually(name+" "+kind, cluster.DefaultTimeout, func(ctx context.Context) error {
			r, err := readRollout(ctx, dyn, e.Namespace, name)
			if err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(r.Status.Conditions, kind) {
				return fmt.Errorf("conditions %+v", r.Status.Conditions)
			}
			return nil
		})
	}
	givenBack := func(h *host) {
		h.waitFor(h.Name+" given back", func() error {
			if h.exists("var/maintenance-required") || nodeUnschedulable(t, e, h.Name) || lockHolder(t, e) != "" {
				return fmt.Errorf("request %v, cordoned %v, lock held by %q", h.exists("var/maintenance-required"), nodeUnschedulable(t, e, h.Name), lockHolder(t, e))
			}
			return nil
		})
	}
	byName := func(name string) *host {
		i := slices.IndexFunc(hosts, func(h *host) bool { return h.Name == name })
		if i < 0 {
			t.Fatalf("an entry of node %s, which is none of the test's hosts", name)
		}
		return hosts[i]
	}

	// The canary: v2 published, the campaign made.
	repo.publish(app1, app2, lib1, lib2)
	start := create("kpt", "kpt-[al]*")
	r := settled("kpt", 1, rollout.Succeeded, rollout.Failed, rollout.RolledBack)
	canaryTime := time.Since(start)
	canary := byName(r.Status.Nodes[0].Name)
	want := []rollout.PackageChange{{Name: "kpt-app", From: "1", To: "2"}, {Name: "kpt-lib", From: "1", To: "2"}}
	s := r.Status.Patch
	if en := r.Status.Nodes[0]; en.State != rollout.Succeeded || !s.Resolved(r.Spec.Signature) || s.ResolvedOn != canary.Name || !slices.Equal(s.Packages, want) {
		t.Fatalf("the canary: entry %+v, set %+v; want it Succeeded and the set %v resolved on it\n%s", en, s, want, canary.Journal(e.Ctx, ""))
	}
	if en := r.Status.Nodes[0]; en.Changed == nil || *en.Changed != 2 || len(en.Packages)+len(en.Skipped) != 0 {
		t.Errorf("the canary's entry says it changed %+v, want the 2 packages of the set", en.NodePatch)
	}
	for _, h := range hosts {
		if got, wantV := versions(h), map[bool]string{true: "2/2", false: "1/1"}[h == canary]; got != wantV {
			t.Errorf("after the canary, %s has %s, want %s", h.Name, got, wantV)
		}
	}
	givenBack(canary)
	e.Eventually("the canary's history listing its packages", cluster.DefaultTimeout, func(ctx context.Context) error {
		n, err := e.Client.CoreV1().Nodes().Get(ctx, canary.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		h, err := history.Parse(n.Annotations[history.Annotation])
		if err != nil {
			return err
		}
		if len(h) == 0 || !slices.Equal(h[len(h)-1].Packages, []string{"kpt-app 1 -> 2", "kpt-lib 1 -> 2"}) {
			return fmt.Errorf("history %+v", h)
		}
		return nil
	})
	t.Logf("the canary %s: resolved, installed and given back %s after the campaign was made", canary.Name, canaryTime.Round(time.Millisecond))

	// v3 published meanwhile; the campaign goes on: the fleet installs v2.
	repo.publish(app1, app2, app3, lib1, lib2)
	if out, err := ctl.Run(e.Ctx, "rollout", "promote", "kpt"); err != nil {
		t.Fatalf("rollout promote: %v\n%s", err, out)
	}
	start = time.Now()
	r = settled("kpt", 3, rollout.Succeeded, rollout.Failed, rollout.RolledBack)
	fleetTime := time.Since(start)
	for _, en := range r.Status.Nodes {
		h := byName(en.Name)
		if en.State != rollout.Succeeded || en.Changed == nil || *en.Changed != 2 || len(en.Packages)+len(en.Skipped) != 0 {
			t.Errorf("%s: entry %+v, want Succeeded with the set's 2 packages", en.Name, en)
		}
		if got := versions(h); got != "2/2" {
			t.Errorf("%s has %s after the campaign, want 2/2 (the canary's set, not v3)", h.Name, got)
		}
		givenBack(h)
	}
	conditionTrue("kpt", rollout.ConditionComplete)
	if out, err := ctl.Run(e.Ctx, "rollout", "status", "kpt"); err != nil || !strings.Contains(out, "Complete: 3 of 3 nodes succeeded") {
		t.Errorf("rollout status: %v\n%s", err, out)
	} else {
		t.Logf("kustodian-ctl rollout status kpt:\n%s", out)
	}
	t.Logf("the fleet (2 hosts, one at a time): %s after the promotion", fleetTime.Round(time.Millisecond))
	out, err := ctl.Run(e.Ctx, "rollout", "report", "kpt", "-o", "csv")
	if err != nil {
		t.Fatalf("rollout report: %v\n%s", err, out)
	}
	var changed []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		f := strings.Split(line, ",")
		if len(f) != 9 || f[2] != rollout.Succeeded {
			t.Fatalf("rollout report -o csv: a line %q, want NODE,STAGE,STATE,STARTED,FINISHED,REBOOTED,PACKAGE,FROM,TO of a node that succeeded:\n%s", line, out)
		}
		changed = append(changed, f[0]+" "+f[6]+" "+f[7]+" "+f[8])
	}
	var want6 []string
	for _, h := range hosts {
		want6 = append(want6, h.Name+" kpt-app 1 2", h.Name+" kpt-lib 1 2")
	}
	slices.Sort(changed)
	if !slices.Equal(changed, want6) {
		t.Errorf("rollout report lists the changes %q, want %q", changed, want6)
	}
	t.Logf("kustodian-ctl rollout report kpt -o csv:\n%s", out)

	// A campaign whose package needs a reboot: its canary installs it,
	// reboots (nspawn exits 133), and after the boot is given back with
	// its entry saying it rebooted.
	repo.publish(app1, app2, app3, lib1, lib2, rb1, rb2)
	start = create("kpt-rb", "kpt-rb")
	var rebooting *host
	e.Eventually("the reboot campaign taken", cluster.DefaultTimeout, func(ctx context.Context) error {
		r, err := readRollout(ctx, dyn, e.Namespace, "kpt-rb")
		if err != nil {
			return err
		}
		if len(r.Status.Nodes) == 0 {
			return fmt.Errorf("no entry yet")
		}
		rebooting = byName(r.Status.Nodes[0].Name)
		return nil
	})
	wctx, cancel := context.WithTimeout(e.Ctx, 2*cluster.DefaultTimeout)
	code, err := rebooting.WaitExit(wctx)
	cancel()
	if err != nil || code != 133 {
		t.Fatalf("%s exited %d (%v), want 133: the campaign should have rebooted it\n%s", rebooting.Name, code, err, rebooting.Journal(e.Ctx, ""))
	}
	if err := rebooting.Boot(e.Ctx); err != nil {
		t.Fatal(err)
	}
	r = settled("kpt-rb", 1, rollout.Succeeded, rollout.Failed, rollout.RolledBack)
	rebootTime := time.Since(start)
	if en := r.Status.Nodes[0]; en.State != rollout.Succeeded || !en.Rebooted || rebooting.version("kpt-rb") != "2" {
		t.Fatalf("the reboot campaign's canary: entry %+v, kpt-rb %s; want Succeeded, rebooted, at 2", en, rebooting.version("kpt-rb"))
	}
	givenBack(rebooting)
	t.Logf("kpt-rb on %s: resolved, installed, rebooted and given back %s after the campaign was made", rebooting.Name, rebootTime.Round(time.Millisecond))

	// v4, whose postinst fails: its canary rolls back to v2 and is held;
	// the campaign stops there.
	repo.publish(app1, app2, app3, app4, lib1, lib2)
	start = create("kpt-v4", "kpt-[al]*")
	r = settled("kpt-v4", 1, rollout.Succeeded, rollout.Failed, rollout.RolledBack)
	rollbackTime := time.Since(start)
	en := r.Status.Nodes[0]
	failed := byName(en.Name)
	if en.State != rollout.RolledBack || len(r.Status.Nodes) != 1 {
		t.Fatalf("v4: entries %+v, want its canary RolledBack and no other entry", r.Status.Nodes)
	}
	if r.Status.Patch.Resolved(r.Spec.Signature) {
		t.Errorf("v4's set was written as proven though its canary failed: %+v", r.Status.Patch)
	}
	for _, h := range hosts {
		if got := versions(h); got != "2/2" {
			t.Errorf("after v4, %s has %s, want 2/2 (rolled back on %s, untouched elsewhere)", h.Name, got, failed.Name)
		}
	}
	if st := failed.run("dpkg-query", "-W", "-f", "${db:Status-Abbrev}", "kpt-app"); strings.TrimSpace(st) != "ii" {
		t.Errorf("kpt-app on %s after the rollback: dpkg status %q, want ii", failed.Name, st)
	}
	if !nodeUnschedulable(t, e, failed.Name) || lockHolder(t, e) != failed.Name {
		t.Errorf("%s after its rollback: cordoned %v, lock held by %q; want it held", failed.Name, nodeUnschedulable(t, e, failed.Name), lockHolder(t, e))
	}
	conditionTrue("kpt-v4", rollout.ConditionFailed)
	t.Logf("v4 on %s: resolved, failed in its postinst, rolled back to v2 and held %s after the campaign was made; entry: %s",
		failed.Name, rollbackTime.Round(time.Millisecond), en.Message)
}
