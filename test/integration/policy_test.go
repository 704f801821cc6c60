package integration

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
	"github.com/kustodian/kustodian/test/timeline"
)

// 7. Bad policies are refused by the API server, with the field named.
func TestPolicyValidation(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodecreds.Install(e, e.Namespace)
	good := `
metadata: {name: workers}
spec:
  nodeSelector: {matchLabels: {role: worker}}
  concurrency: 2
  groupBy: topology.kubernetes.io/zone
  windows:
  - {days: [Sat, Sun], start: "22:00", end: "06:00", timeZone: Europe/Berlin}
  - {start: "00:00", end: "24:00"}
  excludeDates: ["2026-12-24"]
  spacing: 5m
  blockers:
    podSelector: {matchExpressions: [{key: kustodian.io/block, operator: Exists}]}
    prometheus: {url: "http://prometheus.monitoring:9090", alertFilterRegexp: "^(Watchdog|InfoInhibitor)$"}
  health: {maxUnavailable: 25%, workloadsRecovered: true, blockedAfter: 30m}
  autoscaler: {protect: true}
  alertmanager:
    url: http://alertmanager.monitoring:9093
    silence: {matchers: ['instance=~"{{ regexQuote .Node }}(:.*)?"'], duration: 45m, link: "https://runbooks.example.com"}
  drain:
    escalate: [{action: deletePods, namespaceSelector: {matchLabels: {tier: batch}}}]
    quarantine: {maxNodes: 2}
`
	if err := e.ApplyPolicy(good); err != nil {
		t.Fatalf("a good policy was refused: %v", err)
	}
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"time zone", `{metadata: {name: b1}, spec: {windows: [{start: "02:00", end: "06:00", timeZone: Mars/Olympus}]}}`, "spec.windows[0].timeZone"},
		{"end not HH:MM", `{metadata: {name: b2}, spec: {windows: [{start: "02:00", end: "6pm"}]}}`, "spec.windows[0].end"},
		{"start past midnight", `{metadata: {name: b3}, spec: {windows: [{start: "24:00", end: "06:00"}]}}`, "spec.windows[0].start"},
		{"empty window", `{metadata: {name: b4}, spec: {windows: [{start: "02:00", end: "02:00"}]}}`, "start and end are equal"},
		{"weekday", `{metadata: {name: b5}, spec: {windows: [{days: [Saturday], start: "02:00", end: "06:00"}]}}`, "spec.windows[0].days[0]"},
		{"concurrency", `{metadata: {name: b6}, spec: {concurrency: 0}}`, "spec.concurrency"},
		{"date", `{metadata: {name: b7}, spec: {excludeDates: ["24.12.2026"]}}`, "spec.excludeDates[0]"},
		{"duration", `{metadata: {name: b8}, spec: {spacing: "5 minutes"}}`, "spec.spacing"},
		{"maxUnavailable", `{metadata: {name: b9}, spec: {health: {maxUnavailable: 0}}}`, "spec.health.maxUnavailable"},
		{"maxUnavailable percent", `{metadata: {name: b10}, spec: {health: {maxUnavailable: "half"}}}`, "spec.health.maxUnavailable"},
		{"prometheus url", `{metadata: {name: b11}, spec: {blockers: {prometheus: {url: "prometheus:9090"}}}}`, "spec.blockers.prometheus.url"},
		{"regexp", `{metadata: {name: b12}, spec: {blockers: {prometheus: {url: "http://p", alertFilterRegexp: "("}}}}`, "spec.blockers.prometheus.alertFilterRegexp"},
		{"groupBy", `{metadata: {name: b13}, spec: {groupBy: "not a label"}}`, "spec.groupBy"},
		{"reserved name", `{metadata: {name: default}, spec: {}}`, "default is the built-in policy"},
		{"long name", `{metadata: {name: ` + strings.Repeat("a", 41) + `}, spec: {}}`, "at most 40 characters"},
		{"operator", `{metadata: {name: b14}, spec: {nodeSelector: {matchExpressions: [{key: a, operator: Equals}]}}}`, "spec.nodeSelector.matchExpressions[0].operator"},
		{"In without values", `{metadata: {name: b15}, spec: {nodeSelector: {matchExpressions: [{key: a, operator: In}]}}}`, "values must be given for In and NotIn"},
		{"a date that does not exist", `{metadata: {name: b16}, spec: {excludeDates: ["2026-02-30"]}}`, "spec.excludeDates[0]"},
		{"a time zone offset", `{metadata: {name: b17}, spec: {windows: [{start: "02:00", end: "06:00", timeZone: "+02:00"}]}}`, "spec.windows[0].timeZone"},
		{"a duration that overflows", `{metadata: {name: b18}, spec: {spacing: "3000000h"}}`, "spec.spacing"},
		{"0%", `{metadata: {name: b19}, spec: {health: {maxUnavailable: "0%"}}}`, "spec.health.maxUnavailable"},
		{"silence without matchers", `{metadata: {name: b20}, spec: {alertmanager: {url: "http://am:9093", silence: {}}}}`, "spec.alertmanager.silence.matchers"},
		{"credentials", `{metadata: {name: b21}, spec: {alertmanager: {url: "http://am:9093", credentials: {file: /etc/shadow}}}}`, "credentials are host configuration"},
		{"an escalation of another kind", `{metadata: {name: b22}, spec: {drain: {escalate: [{action: evictHarder, namespaceSelector: {}}]}}}`, "spec.drain.escalate[0].action"},
		{"quarantine of no node", `{metadata: {name: b23}, spec: {drain: {quarantine: {maxNodes: 0}}}}`, "spec.drain.quarantine.maxNodes"},
	} {
		err := e.ApplyPolicy(tc.doc)
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: refused without naming %q: %v", tc.name, tc.want, err)
		}
	}
}

// labelNode sets a label on a node.
func labelNode(e *cluster.Env, node, key, value string) {
	e.T.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	if _, err := e.Client.CoreV1().Nodes().Patch(e.Ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.T.Fatalf("labelling node %s: %v", node, err)
	}
}

// grantAfter opens a gate, waits for the node to get the go-ahead, logs how
// long that took, and lets the node finish.
func grantAfter(t *testing.T, a *agentProc, what string, open func()) {
	t.Helper()
	start := time.Now()
	open()
	a.waitInProgress(cluster.DefaultTimeout)
	t.Logf("%s granted %s after %s", a.node, time.Since(start).Round(time.Millisecond), what)
	a.finish()
	a.exitsZero()
}

// maxActivePerGroup replays a timeline and returns, per group (from the
// test's own map of node to group, not from anything the agents wrote),
// the most nodes that were Draining, InMaintenance or Rebooting at once,
// and the most nodes active at once overall.
func maxActivePerGroup(tl *timeline.Timeline, groupOf map[string]string) (perGroup map[string]int, overall int) {
	perGroup = map[string]int{}
	state := map[string]lock.State{}
	for _, tr := range tl.Transitions() {
		state[tr.Node] = tr.State
		count := map[string]int{}
		total := 0
		for n, s := range state {
			if s == lock.Draining || s == lock.InMaintenance || s == lock.Rebooting {
				count[groupOf[n]]++
				total++
			}
		}
		for g, c := range count {
			perGroup[g] = max(perGroup[g], c)
		}
		overall = max(overall, total)
	}
	return perGroup, overall
}

// firstInZone: the one node waiting in a zone's queue.
var firstInZone = regexp.MustCompile(`^waiting: position 1 of 1( on joining)?, lock held by `)

// 1. Four nodes in two zones, groupBy zone, concurrency 1: two nodes at
// once, never two of one zone.
func TestPolicyGroupsByZone(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(4)
	zone := map[string]string{nodes[0]: "zone-a", nodes[1]: "zone-a", nodes[2]: "zone-b", nodes[3]: "zone-b"}
	for n, z := range zone {
		labelNode(e, n, "topology.kubernetes.io/zone", z)
	}
	nodecreds.Install(e, e.Namespace)
	if err := e.ApplyPolicy(`{metadata: {name: zones}, spec: {groupBy: topology.kubernetes.io/zone, concurrency: 1}}`); err != nil {
		t.Fatal(err)
	}
	tl := recordTimeline(e)
	agents := startRequesting(t, e, nodes)
	// Nobody finishes before two nodes, one per zone, are in maintenance
	// together: the overlap is certain, not lucky.
	e.Eventually("two nodes in maintenance at once", cluster.DefaultTimeout, func(context.Context) error {
		in := map[string]int{}
		for _, a := range agents {
			if a.inProgress() {
				in[zone[a.node]]++
			}
		}
		if in["zone-a"] != 1 || in["zone-b"] != 1 {
			return fmt.Errorf("in maintenance per zone: %v", in)
		}
		return nil
	})
	for _, a := range agents {
		if !a.inProgress() {
			waitRecord(e, a.node, "to wait in its zone's queue", func(r *lock.Record) error {
				// Named by the summary, or on its own view if it joined
				// after the holder's LIST (docs/agent.md): either way first.
				if err := inState(lock.Waiting)(r); err != nil {
					return err
				}
				if !firstInZone.MatchString(r.Message) {
					return fmt.Errorf("message %q does not match %s", r.Message, firstInZone)
				}
				if r.GroupRef().String() != "zones/"+zone[a.node] {
					return fmt.Errorf("group %s, want zones/%s", r.GroupRef(), zone[a.node])
				}
				return nil
			})
		}
	}
	finishInTurn(t, e, agents)
	for _, a := range agents {
		a.exitsZero()
	}
	e.Eventually("every node to be Idle in the timeline", cluster.DefaultTimeout, func(context.Context) error { return tl.AllIdle(nodes) })
	t.Logf("timeline:\n%s", tl)
	perZone, overall := maxActivePerGroup(tl, zone)
	if perZone["zone-a"] != 1 || perZone["zone-b"] != 1 || overall != 2 {
		t.Errorf("most nodes active at once: per zone %v, overall %d; want 1 per zone, 2 overall", perZone, overall)
	}
	for _, name := range []string{"lock-zones-zone-a-0", "lock-zones-zone-b-0"} {
		if _, err := e.Client.CoordinationV1().Leases(e.Namespace).Get(e.Ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("lock %s: %v", name, err)
		}
	}
}

// 2. A window that is closed now: the node waits with the next opening in
// its message; opening the window grants it without waiting for a resync.
func TestPolicyWindow(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(1)
	nodecreds.Install(e, e.Namespace)
	opens := time.Now().UTC().Add(3 * time.Hour)
	closed := fmt.Sprintf(`{metadata: {name: night}, spec: {windows: [{start: "%s", end: "%s"}]}}`, opens.Format("15:04"), opens.Add(time.Hour).Format("15:04"))
	if err := e.ApplyPolicy(closed); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, e, nodes[0])
	a.request("kernel")
	a.start()
	want := "waiting: outside window: next opens " + opens.Format("Mon 15:04") + " UTC"
	waitRecord(e, a.node, "to wait for the window", inStateSaying(lock.Waiting, want))
	// The window is closed for the whole group: the node stays the head
	// (not Blocked), so that it goes first when the window opens.
	if r := record(e, a.node); r == nil || r.Blocked != "" || !strings.Contains(r.Gates, `"gate":"window","verdict":"closed"`) {
		t.Errorf("record %+v: want the window gate closed, and not Blocked", r)
	}
	// "Why is my node not going?" in one command, and the policy's view.
	out := mustCtl(t, e, "status", a.node)
	if !strings.Contains(out, "Gates of "+a.node+" (policy night, group night):") || !regexp.MustCompile(`window\s+closed\s+outside window: next opens`).MatchString(out) {
		t.Errorf("status %s:\n%s", a.node, out)
	}
	out = mustCtl(t, e, "policy")
	if !regexp.MustCompile(`night\s+0\s+1\s+night \(1, 0/1\)\s+closed: next opens`).MatchString(out) {
		t.Errorf("policy:\n%s", out)
	}
	start := time.Now()
	if err := e.ApplyPolicy(`{metadata: {name: night}, spec: {windows: [{start: "00:00", end: "24:00"}]}}`); err != nil {
		t.Fatal(err)
	}
	waitRecord(e, a.node, "to be granted once the window opens", func(r *lock.Record) error {
		if r.State == lock.Waiting || r.State == "" {
			return fmt.Errorf("still %s: %s", r.State, r.Message)
		}
		return nil
	})
	t.Logf("granted %s after the window opened (a policy update; resync is 30 s)", time.Since(start).Round(time.Millisecond))
	a.waitInProgress(cluster.DefaultTimeout)
	a.finish()
	a.exitsZero()
}

// 3. A blocking pod on a node holds it; the node behind it goes first;
// deleting the pod grants it.
func TestPolicyBlockingPod(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	nodecreds.Install(e, e.Namespace)
	if err := e.ApplyPolicy(`{metadata: {name: backups}, spec: {blockers: {podSelector: {matchLabels: {kustodian.io/block: "true"}}}}}`); err != nil {
		t.Fatal(err)
	}
	backup := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "backup-1", Namespace: e.Namespace, Labels: map[string]string{"kustodian.io/block": "true"}},
		Spec:       corev1.PodSpec{NodeName: nodes[0], Containers: []corev1.Container{{Name: "b", Image: "registry.k8s.io/pause:3.10"}}},
	}
	if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Ctx, backup, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	first, second := newAgent(t, e, nodes[0]), newAgent(t, e, nodes[1])
	first.request("kernel")
	first.start()
	waitRecord(e, first.node, "to be held by the backup", inStateSaying(lock.Waiting, "waiting: blocked by pod "+e.Namespace+"/backup-1"))
	second.request("kernel") // arrives later, goes first
	second.start()
	second.waitInProgress(cluster.DefaultTimeout)
	if r := record(e, first.node); r == nil || r.State != lock.Waiting {
		t.Fatalf("the held node: %+v", r)
	}
	second.finish()
	second.exitsZero()
	grantAfter(t, first, "the blocking pod was deleted", func() {
		if err := e.Client.CoreV1().Pods(e.Namespace).Delete(e.Ctx, "backup-1", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
			t.Fatal(err)
		}
	})
}
