package integration

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/kustodian/kustodian/internal/policy"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
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
