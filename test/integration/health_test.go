package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

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
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	nodecreds.Install(e, e.Namespace)
	stub := &prometheusStub{}
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	stub.set(alert("KubePodCrashLooping", "firing"), alert("Watchdog", "firing"))
	if err := e.ApplyPolicy(fmt.Sprintf(`{metadata: {name: alerts}, spec: {blockers: {prometheus: {url: %q, alertFilterRegexp: "^Watchdog$"}}}}`, srv.URL)); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, e, nodes[0], "--gates-poll", "1s", "--prometheus-endpoints", srv.URL)
	a.request("kernel")
	a.start()
	waitRecord(e, a.node, "to be held by the alert", inStateSaying(lock.Waiting, "waiting: alert KubePodCrashLooping firing"))
	grantAfter(t, a, "the alert stopped (gates.poll 1s)", func() { stub.set(alert("Watchdog", "firing"), alert("KubeCPUOvercommit", "inactive")) })

	// Unreachable: the stub's address once it is closed.
	srv.Close()
	b := newAgent(t, e, nodes[1], "--gates-poll", "1s", "--prometheus-endpoints", srv.URL)
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
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(3)
	nodecreds.Install(e, e.Namespace)
	sel := fmt.Sprintf("{matchLabels: {%s: %s}}", cluster.LabelTestEnv, e.ID)
	if err := e.ApplyPolicy(fmt.Sprintf(`{metadata: {name: careful}, spec: {nodeSelector: %s, health: {maxUnavailable: 1}}}`, sel)); err != nil {
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
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(3)
	first, second, spare := nodes[0], nodes[1], nodes[2]
	labelNode(e, first, "web", "yes")
	nodecreds.Install(e, e.Namespace)
	if err := e.ApplyPolicy(`{metadata: {name: recover}, spec: {health: {workloadsRecovered: true, blockedAfter: 2s}}}`); err != nil {
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
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(4)
	zone := map[string]string{nodes[0]: "zone-a", nodes[1]: "zone-b", nodes[2]: "zone-a", nodes[3]: "zone-b"}
	for n, z := range zone {
		labelNode(e, n, "topology.kubernetes.io/zone", z)
	}
	nodecreds.Install(e, e.Namespace)
	sel := fmt.Sprintf("{matchLabels: {%s: %s}}", cluster.LabelTestEnv, e.ID)
	if err := e.ApplyPolicy(fmt.Sprintf(`{metadata: {name: zones}, spec: {nodeSelector: %s, groupBy: topology.kubernetes.io/zone, health: {maxUnavailable: 1}}}`, sel)); err != nil {
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
