package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/buildbin"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/dist"
	"github.com/kustodian/kustodian/test/judge"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// previousRelease is the commit of the release before this one: the last
// of the third release, whose agents fleets run while they upgrade to this
// one. docs/agent.md ("Upgrading the agents") says which versions may
// share a queue; when a release is made, this becomes its last commit.
const previousRelease = "1dbcc7577f171b50e242be9a96df2b79a5c6903e"

// An upgrade goes through the fleet node by node, through the same queue:
// for hours, agents of two releases share one protocol. Eight nodes ask at
// once, half of them run by agents of the previous release (built from
// git history), half by this tree's, all with node-bound credentials in
// an installation of this tree. Mid-queue two of the old agents are
// upgraded: the one in maintenance dies as a reboot kills it and comes
// back as today's agent (a maintenance that upgrades kustodian itself),
// and one that waits is restarted as systemd restarts it. The judge,
// which shares no code with either, follows the whole rollout; every
// node must end Idle, uncordoned, each agent exiting 0.
//
// Then today's agent meets Leases in a newer format, as it would beside
// a later, incompatible release: a record in the queue, then the lock. It
// must not take a turn while it cannot read them, must say why in its
// record, and must go on once they are gone or back to a format it reads.
func TestMixedAgentVersions(t *testing.T) {
	t.Parallel()
	old := buildbin.AtCommit(t, dist.RepoRoot(t), previousRelease, cluster.CacheRoot()+"/releases")
	today := kustodianBinary(t)
	e := cluster.New(t)
	nodes := e.Nodes(8)
	nodecreds.Install(e, e.Namespace)
	e.Deployment("web", 8)
	e.PDB("web", "web", 6)
	e.RunningPods("web", 8)
	j := startJudge(e, judge.Rules{Slots: map[string]int{"default": 1}})

	agents := map[string]*agentProc{}
	isOld := map[string]bool{}
	for i, n := range nodes {
		a := newAgent(t, e, n)
		if i%2 == 0 {
			a.spec.Binary, isOld[n] = old, true
		}
		a.request("kernel")
		a.start()
		agents[n] = a
	}

	startedOld := oldOnes(nodes, isOld)
	finished := map[string]bool{}
	entered := map[string]time.Time{} // when the test saw a node's maintenance start
	formats := map[string][]string{}  // format → the Leases seen in it
	var upgraded []string
	e.Eventually("the rollout of agents of two releases to end", 5*time.Minute, func(ctx context.Context) error {
		noteFormats(e, formats)
		var left []string
		for _, n := range nodes {
			a := agents[n]
			if a.ended() {
				if !finished[n] {
					e.T.Fatalf("the agent of %s exited before its script ended", n)
				}
				continue
			}
			left = append(left, n+"="+stateOf(e, n))
			if finished[n] || !a.inProgress() {
				continue
			}
			if isOld[n] && len(upgraded) == 0 {
				upgraded = upgradeMidQueue(e, agents, isOld, n, today)
			}
			if entered[n].IsZero() {
				entered[n] = time.Now()
			}
			// The maintenance lasts until every other agent that waits has
			// beaten since it began, each having decided with this node in
			// maintenance: one that took a turn then is seen by the judge.
			if !othersBeatSince(e, agents, finished, n, entered[n]) {
				continue
			}
			a.finish()
			finished[n] = true
		}
		if len(left) > 0 {
			return fmt.Errorf("still running: %v", left)
		}
		return nil
	})
	for _, n := range nodes {
		agents[n].exitsZero()
	}
	// Agents share a queue only in one format: the previous release
	// marks none, which is format 1. A change that raises the format
	// cannot be upgraded node by node (docs/agent.md, "Upgrading the
	// agents"): then this test must say how that release upgrades.
	if len(formats) != 1 {
		t.Errorf("the agents of two releases wrote Leases in formats %v: they do not share a queue", formats)
	}
	if len(upgraded) != 2 {
		t.Fatalf("upgraded %v mid-queue, want one in maintenance and one waiting", upgraded)
	}
	t.Logf("agents of %s: %v; upgraded mid-queue: %v", previousRelease[:12], startedOld, upgraded)
	verdict(e, j, nodes)
	for _, n := range nodes {
		if nodeObject(e, n).Spec.Unschedulable {
			t.Errorf("%s is left cordoned", n)
		}
	}

	refusesNewerFormats(e, agents[nodes[1]])
}

// upgradeMidQueue replaces the old agent of n, in maintenance, by today's
// (kill -9, as the reboot of a maintenance that upgraded the package),
// and one old agent that still waits (SIGTERM, as systemctl restart), and
// returns the two nodes. n's agent must take its maintenance up where the
// old one left it.
func upgradeMidQueue(e *cluster.Env, agents map[string]*agentProc, isOld map[string]bool, n, today string) []string {
	e.T.Helper()
	waiter := ""
	for m, a := range agents {
		if isOld[m] && m != n && !a.inProgress() && stateOf(e, m) == string(lock.Waiting) {
			waiter = m
			break
		}
	}
	if waiter == "" {
		e.T.Fatalf("no agent of the previous release waits while %s is in maintenance", n)
	}
	a := agents[n]
	a.kill()
	restarted := time.Now()
	a.spec.Binary, isOld[n] = today, false
	a.start()
	w := agents[waiter]
	w.stop()
	w.spec.Binary, isOld[waiter] = today, false
	w.start()
	// Today's agent takes the maintenance up: the node stays in it, and
	// its record beats again.
	waitRecord(e, n, "in maintenance under today's agent", func(r *lock.Record) error {
		if err := inState(lock.InMaintenance)(r); err != nil {
			return err
		}
		if !r.Heartbeat.After(restarted) {
			return fmt.Errorf("heartbeat %s, not since the restart at %s", r.Heartbeat, restarted)
		}
		return nil
	})
	e.T.Logf("upgraded mid-queue: %s in maintenance (kill -9), %s waiting (SIGTERM)", n, waiter)
	return []string{n, waiter}
}

// refusesNewerFormats: a record in the queue, then the lock, in a format
// this build does not read.
func refusesNewerFormats(e *cluster.Env, a *agentProc) {
	e.T.Helper()
	leases := e.Client.CoordinationV1().Leases(e.Namespace)
	future := "node-from-a-later-release"
	now := metav1.NewMicroTime(time.Now())
	rec := &coordv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: lock.RecordName(future), Annotations: map[string]string{
			lock.AnnotationFormat: "2", lock.AnnotationState: string(lock.Waiting)}},
		Spec: coordv1.LeaseSpec{HolderIdentity: &future, AcquireTime: &now, RenewTime: &now},
	}
	if _, err := leases.Create(e.Ctx, rec, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
	a.request("kernel")
	a.start()
	saysFormat := func(name string) func(r *lock.Record) error {
		return func(r *lock.Record) error {
			if err := inStateSaying(lock.Waiting, "Lease "+e.Namespace+"/"+name+" is in format 2")(r); err != nil {
				return err
			}
			if h := lockHolder(e); h != "" {
				return fmt.Errorf("the lock is held by %s", h)
			}
			return nil
		}
	}
	waitRecord(e, a.node, "to refuse the record in format 2", saysFormat(rec.Name))
	// While it cannot read the queue it keeps out of it, and says so.
	if r := record(e, a.node); !strings.Contains(r.Message, "upgrade kustodian on this node") || r.Blocked == "" {
		e.T.Errorf("record %+v: want it blocked, saying to upgrade", r)
	}
	if err := leases.Delete(e.Ctx, rec.Name, metav1.DeleteOptions{}); err != nil {
		e.T.Fatal(err)
	}
	a.waitInProgress(cluster.DefaultTimeout)
	a.completes()

	// The lock, now free, marked by a later release.
	l, err := leases.Get(e.Ctx, lock.DefaultGroup.LockName(0), metav1.GetOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	l.Annotations[lock.AnnotationFormat] = "2"
	if _, err := leases.Update(e.Ctx, l, metav1.UpdateOptions{}); err != nil {
		e.T.Fatal(err)
	}
	a.request("kernel")
	a.start()
	waitRecord(e, a.node, "to refuse the lock in format 2", saysFormat(l.Name))
	l, err = leases.Get(e.Ctx, l.Name, metav1.GetOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	l.Annotations[lock.AnnotationFormat] = "1"
	if _, err := leases.Update(e.Ctx, l, metav1.UpdateOptions{}); err != nil {
		e.T.Fatal(err)
	}
	a.waitInProgress(cluster.DefaultTimeout)
	a.completes()
}

// noteFormats notes the format of each Lease of the namespace, as the
// design says it: the annotation kustodian.io/format, none being 1.
func noteFormats(e *cluster.Env, formats map[string][]string) {
	e.T.Helper()
	list, err := e.Client.CoordinationV1().Leases(e.Namespace).List(e.Ctx, metav1.ListOptions{})
	if err != nil {
		e.T.Fatalf("listing the Leases: %v", err)
	}
	for _, l := range list.Items {
		f, ok := l.Annotations["kustodian.io/format"]
		if !ok {
			f = "1"
		}
		if !slices.Contains(formats[f], l.Name) {
			formats[f] = append(formats[f], l.Name)
		}
	}
}

// othersBeatSince: every agent but n's that still runs and has not
// finished has renewed its record since t.
func othersBeatSince(e *cluster.Env, agents map[string]*agentProc, finished map[string]bool, n string, t time.Time) bool {
	for m, a := range agents {
		if m == n || finished[m] || !a.running() {
			continue
		}
		if r := record(e, m); r == nil || !r.Heartbeat.After(t) {
			return false
		}
	}
	return true
}

func oldOnes(nodes []string, isOld map[string]bool) []string {
	var out []string
	for _, n := range nodes {
		if isOld[n] {
			out = append(out, n)
		}
	}
	return out
}
