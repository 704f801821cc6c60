package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	corev1 "k8s.io/api/core/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/policy"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
	"github.com/kustodian/kustodian/test/timeline"
)

// applyPolicy creates or replaces a MaintenancePolicy from YAML (its spec
// and name) in the test's namespace, and returns the API server's error.
func applyPolicy(e *cluster.Env, doc string) error {
	e.T.Helper()
	var u unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		e.T.Fatalf("test policy does not parse: %v", err)
	}
	u.SetAPIVersion(policy.Group + "/" + policy.Version)
	u.SetKind(policy.Kind)
	u.SetNamespace(e.Namespace)
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		e.T.Fatal(err)
	}
	ri := dyn.Resource(policy.GVR).Namespace(e.Namespace)
	old, err := ri.Get(e.Ctx, u.GetName(), metav1.GetOptions{})
	if err == nil {
		u.SetResourceVersion(old.GetResourceVersion())
		_, err = ri.Update(e.Ctx, &u, metav1.UpdateOptions{})
		return err
	}
	_, err = ri.Create(e.Ctx, &u, metav1.CreateOptions{})
	return err
}

// 7. Bad policies are refused by the API server, with the field named.
func TestPolicyValidation(t *testing.T) {
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
`
	if err := applyPolicy(e, good); err != nil {
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
	} {
		err := applyPolicy(e, tc.doc)
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
	e := cluster.New(t)
	nodes := e.Nodes(4)
	zone := map[string]string{nodes[0]: "zone-a", nodes[1]: "zone-a", nodes[2]: "zone-b", nodes[3]: "zone-b"}
	for n, z := range zone {
		labelNode(e, n, "topology.kubernetes.io/zone", z)
	}
	nodecreds.Install(e, e.Namespace)
	if err := applyPolicy(e, `{metadata: {name: zones}, spec: {groupBy: topology.kubernetes.io/zone, concurrency: 1}}`); err != nil {
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
	if err := applyPolicy(e, closed); err != nil {
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
	if err := applyPolicy(e, `{metadata: {name: night}, spec: {windows: [{start: "00:00", end: "24:00"}]}}`); err != nil {
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
	e := cluster.New(t)
	nodes := e.Nodes(2)
	nodecreds.Install(e, e.Namespace)
	if err := applyPolicy(e, `{metadata: {name: backups}, spec: {blockers: {podSelector: {matchLabels: {kustodian.io/block: "true"}}}}}`); err != nil {
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

// prometheusStub is a real HTTP server speaking the part of Prometheus' API
// the blocker reads: /api/v1/alerts.
type prometheusStub struct {
	mu     sync.Mutex
	alerts []map[string]any
	asked  int
}

func (p *prometheusStub) set(alerts ...map[string]any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.alerts = alerts
}

func (p *prometheusStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/alerts" {
		http.NotFound(w, r)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked++
	alerts := p.alerts
	if alerts == nil {
		alerts = []map[string]any{}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"alerts": alerts}})
}

func alert(name, state string) map[string]any {
	return map[string]any{"labels": map[string]string{"alertname": name, "severity": "warning"}, "state": state, "activeAt": time.Now().UTC().Format(time.RFC3339)}
}

// 4. A firing alert blocks; a filtered alert does not; an unreachable
// Prometheus blocks with that reason.
func TestPolicyPrometheus(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(2)
	nodecreds.Install(e, e.Namespace)
	stub := &prometheusStub{}
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	stub.set(alert("KubePodCrashLooping", "firing"), alert("Watchdog", "firing"))
	if err := applyPolicy(e, fmt.Sprintf(`{metadata: {name: alerts}, spec: {blockers: {prometheus: {url: %q, alertFilterRegexp: "^Watchdog$"}}}}`, srv.URL)); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, e, nodes[0], "--gates-poll", "1s")
	a.request("kernel")
	a.start()
	waitRecord(e, a.node, "to be held by the alert", inStateSaying(lock.Waiting, "waiting: alert KubePodCrashLooping firing"))
	grantAfter(t, a, "the alert stopped (gates.poll 1s)", func() { stub.set(alert("Watchdog", "firing"), alert("KubeCPUOvercommit", "inactive")) })

	// Unreachable: the stub's address once it is closed.
	srv.Close()
	b := newAgent(t, e, nodes[1], "--gates-poll", "1s")
	b.request("kernel")
	b.start()
	waitRecord(e, b.node, "to be held by an unreachable Prometheus", inStateSaying(lock.Waiting, "Prometheus cannot be asked, so it blocks: "+srv.URL+"/api/v1/alerts unreachable"))
	l, err := e.Client.CoordinationV1().Leases(e.Namespace).Get(e.Ctx, "lock-alerts-0", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the lock %s used: %v", "lock-alerts-0", err)
	}
	if h := lock.Holder(l); h != "" {
		t.Errorf("%s holds the lock while Prometheus cannot be asked", h)
	}
}

// 5. maxUnavailable 1 with another node cordoned: no grant until it is back.
func TestPolicyMaxUnavailable(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(3)
	nodecreds.Install(e, e.Namespace)
	sel := fmt.Sprintf("{matchLabels: {%s: %s}}", cluster.LabelTestEnv, e.ID)
	if err := applyPolicy(e, fmt.Sprintf(`{metadata: {name: careful}, spec: {nodeSelector: %s, health: {maxUnavailable: 1}}}`, sel)); err != nil {
		t.Fatal(err)
	}
	e.Cordon(nodes[2]) // an admin's cordon: unavailable
	a := newAgent(t, e, nodes[0], "--gates-poll", "1s")
	a.request("kernel")
	a.start()
	waitRecord(e, a.node, "to wait for the cordoned node", inStateSaying(lock.Waiting, "waiting: 2 of 1 allowed nodes unavailable: "+nodes[2]+" cordoned"))
	grantAfter(t, a, "the other node was uncordoned (gates.poll 1s)", func() { uncordon(e, nodes[2]) })
}

// 6. workloadsRecovered: the next node waits until the Deployment drained
// from the previous node is fully available again; blockedAfter emits
// MaintenanceBlocked.
func TestPolicyWorkloadsRecovered(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(3)
	first, second, spare := nodes[0], nodes[1], nodes[2]
	labelNode(e, first, "web", "yes")
	nodecreds.Install(e, e.Namespace)
	if err := applyPolicy(e, `{metadata: {name: recover}, spec: {health: {workloadsRecovered: true, blockedAfter: 2s}}}`); err != nil {
		t.Fatal(err)
	}
	replicas := int32(2)
	labels := map[string]string{"app": "web"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.Namespace},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
				NodeSelector: map[string]string{cluster.LabelTestEnv: e.ID, "web": "yes"},
				Containers:   []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
			}}},
	}
	if _, err := e.Client.AppsV1().Deployments(e.Namespace).Create(e.Ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.RunningPods("web", 2)

	hook := newWebhook(t)
	a, b := newAgent(t, e, first), newAgent(t, e, second, "--gates-poll", "1s", "--notify-urls", hook.url())
	a.request("kernel")
	a.start()
	a.waitInProgress(cluster.DefaultTimeout)
	l, err := e.Client.CoordinationV1().Leases(e.Namespace).Get(e.Ctx, "lock-recover-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Annotations[lock.AnnotationDisrupted]; !strings.HasPrefix(got, "ReplicaSet/"+e.Namespace+"/web-") {
		t.Errorf("the lock records %q as disrupted, want web's ReplicaSet", got)
	}
	// The pods cannot come back to the first node: web stays unavailable.
	labelNode(e, first, "web", "no")
	b.request("kernel")
	b.start()
	a.finish()
	a.exitsZero()
	want := "waiting: waiting for Deployment/" + e.Namespace + "/web (0/2) to be available again"
	waitRecord(e, second, "to wait for web", inStateSaying(lock.Waiting, want))
	waitRecord(e, second, "to say it is blocked past blockedAfter", inStateSaying(lock.Waiting, "(blocked since "))
	e.Eventually("a MaintenanceBlocked Event about "+second, cluster.DefaultTimeout, func(ctx context.Context) error {
		evs, err := e.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + second + ",reason=MaintenanceBlocked"})
		if err != nil {
			return err
		}
		if len(evs.Items) != 1 || !strings.Contains(evs.Items[0].Message, "web (0/2)") {
			return fmt.Errorf("%d Events: %+v", len(evs.Items), evs.Items)
		}
		return nil
	})
	hook.says(e, "Kustodian: "+second+" has waited ")
	grantAfter(t, b, "web could run again (gates.poll 1s)", func() { labelNode(e, spare, "web", "yes") })
}

// maxUnavailable holds across groups: two zones each with a free slot, all
// nodes asking at once, but only one node of the policy may be out at a
// time. The heads of both zones find room in the same instant; the one that
// took its lock later gives it back.
func TestPolicyMaxUnavailableAcrossGroups(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(4)
	zone := map[string]string{nodes[0]: "zone-a", nodes[1]: "zone-b", nodes[2]: "zone-a", nodes[3]: "zone-b"}
	for n, z := range zone {
		labelNode(e, n, "topology.kubernetes.io/zone", z)
	}
	nodecreds.Install(e, e.Namespace)
	sel := fmt.Sprintf("{matchLabels: {%s: %s}}", cluster.LabelTestEnv, e.ID)
	if err := applyPolicy(e, fmt.Sprintf(`{metadata: {name: zones}, spec: {nodeSelector: %s, groupBy: topology.kubernetes.io/zone, health: {maxUnavailable: 1}}}`, sel)); err != nil {
		t.Fatal(err)
	}
	tl := recordTimeline(e)
	var agents []*agentProc
	for _, n := range nodes {
		a := newAgent(t, e, n, "--gates-poll", "1s")
		a.request("kernel")
		agents = append(agents, a)
	}
	for _, a := range agents {
		a.start()
	}
	finishInTurn(t, e, agents)
	for _, a := range agents {
		a.exitsZero()
	}
	e.Eventually("every node to be Idle in the timeline", cluster.DefaultTimeout, func(context.Context) error { return tl.AllIdle(nodes) })
	t.Logf("timeline:\n%s", tl)
	if _, overall := maxActivePerGroup(tl, zone); overall != 1 {
		t.Errorf("%d nodes of the policy were out at once; maxUnavailable is 1", overall)
	}
}
