package policy

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func pol(name string, prec int32, sel map[string]string, mod ...func(*Spec)) *MaintenancePolicy {
	p := &MaintenancePolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: Spec{Precedence: prec}}
	if sel != nil {
		p.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: sel}
	}
	for _, m := range mod {
		m(&p.Spec)
	}
	return p
}

func TestResolve(t *testing.T) {
	workers := pol("workers", 0, map[string]string{"role": "worker"})
	gpu := pol("gpu", 10, map[string]string{"gpu": "true"})
	zones := pol("zones", 5, map[string]string{"role": "worker"}, func(s *Spec) { s.GroupBy = "zone" })
	all := pol("all", -1, nil)
	twin := pol("twin", 0, map[string]string{"role": "worker"})
	for _, tc := range []struct {
		name      string
		policies  []*MaintenancePolicy
		labels    map[string]string
		wantName  string
		wantGroup string
		wantErr   string
	}{
		{"no policies: the default", nil, map[string]string{"role": "worker"}, DefaultName, "", ""},
		{"not selected: the default", []*MaintenancePolicy{gpu}, map[string]string{"role": "worker"}, DefaultName, "", ""},
		{"selected", []*MaintenancePolicy{workers, gpu}, map[string]string{"role": "worker"}, "workers", "", ""},
		{"highest precedence wins", []*MaintenancePolicy{workers, gpu}, map[string]string{"role": "worker", "gpu": "true"}, "gpu", "", ""},
		{"an empty selector selects all", []*MaintenancePolicy{all}, nil, "all", "", ""},
		{"groupBy: the label's value", []*MaintenancePolicy{zones, workers}, map[string]string{"role": "worker", "zone": "eu-1"}, "zones", "eu-1", ""},
		{"groupBy: a node without the label is held", []*MaintenancePolicy{zones}, map[string]string{"role": "worker"}, "zones", "", "lacks"},
		{"a tie is an error", []*MaintenancePolicy{workers, twin}, map[string]string{"role": "worker"}, "twin", "", "both select this node with precedence 0"},
		{"an invalid policy holds its nodes", []*MaintenancePolicy{pol("bad", 0, nil, func(s *Spec) { s.Windows = []Window{{Start: "x", End: "06:00"}} })}, nil, "bad", "", `spec.windows[0].start: "x" is not HH:MM`},
		{"an unreadable policy holds every node", []*MaintenancePolicy{workers, Unreadable("broken", errFake)}, nil, "broken", "", "cannot be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := Resolve(tc.policies, tc.labels)
			if e.Name != tc.wantName || e.Group != tc.wantGroup {
				t.Errorf("got %s/%s, want %s/%s", e.Name, e.Group, tc.wantName, tc.wantGroup)
			}
			if (e.Err == nil) != (tc.wantErr == "") || (e.Err != nil && !strings.Contains(e.Err.Error(), tc.wantErr)) {
				t.Errorf("err %v, want %q", e.Err, tc.wantErr)
			}
		})
	}
}

var errFake = &fakeErr{}

type fakeErr struct{}

func (*fakeErr) Error() string { return "json: cannot unmarshal" }

func TestValidate(t *testing.T) {
	pct := intstr.FromString("25%")
	zero := intstr.FromInt32(0)
	for _, tc := range []struct {
		p    *MaintenancePolicy
		want string
	}{
		{pol("ok", 0, nil, func(s *Spec) { s.Health.MaxUnavailable = &pct; s.GroupBy = "topology.kubernetes.io/zone" }), ""},
		{pol("default", 0, nil), "metadata.name: \"default\" is the built-in policy"},
		{pol("Bad_Name", 0, nil), "metadata.name: must be lower-case"},
		{pol("c", 0, nil, func(s *Spec) { s.Concurrency = -1 }), "spec.concurrency: must be between 1 and 1000"},
		{pol("g", 0, nil, func(s *Spec) { s.GroupBy = "not a key" }), "spec.groupBy"},
		{pol("m", 0, nil, func(s *Spec) { s.Health.MaxUnavailable = &zero }), "spec.health.maxUnavailable"},
		{pol("m0", 0, nil, func(s *Spec) { s.Health.MaxUnavailable = ptr(intstr.FromString("0%")) }), "spec.health.maxUnavailable"},
		{pol("c2", 0, nil, func(s *Spec) { s.Concurrency = 5000 }), "spec.concurrency: must be between 1 and 1000"},
		{pol("s", 0, nil, func(s *Spec) { s.Spacing = &metav1.Duration{Duration: -time.Second} }), "spec.spacing"},
		{pol("p", 0, nil, func(s *Spec) { s.Blockers.Prometheus = &Prometheus{URL: "prometheus:9090"} }), "spec.blockers.prometheus.url"},
		{pol("r", 0, nil, func(s *Spec) { s.Blockers.Prometheus = &Prometheus{URL: "http://p", AlertFilterRegexp: "("} }), "alertFilterRegexp"},
		{pol("am", 0, nil, func(s *Spec) {
			s.Alertmanager = &Alertmanager{URL: "http://am:9093",
				Silence: &Silence{Matchers: []string{`instance=~"{{ regexQuote .Node }}(:.*)?"`, `node="{{ .Node }}"`}}}
			s.Blockers.Alertmanager = &AlertmanagerBlocker{Matchers: []string{`severity="critical"`}}
			s.Drain = Drain{Escalate: []DrainEscalation{{Action: EscalateDeletePods, NamespaceSelector: &metav1.LabelSelector{}}}, Quarantine: &Quarantine{MaxNodes: 2}}
		}), ""},
		{pol("am1", 0, nil, func(s *Spec) { s.Blockers.Alertmanager = &AlertmanagerBlocker{} }), "spec.blockers.alertmanager: needs spec.alertmanager.url"},
		{pol("am2", 0, nil, func(s *Spec) { s.Alertmanager = &Alertmanager{URL: "am:9093"} }), "spec.alertmanager.url"},
		{pol("am3", 0, nil, func(s *Spec) {
			s.Alertmanager = &Alertmanager{URL: "http://am", Credentials: []byte(`{"type":"Basic","file":"/etc/shadow"}`)}
		}), "spec.alertmanager.credentials: credentials are host configuration"},
		{pol("am4", 0, nil, func(s *Spec) {
			s.Alertmanager = &Alertmanager{URL: "http://am", Silence: &Silence{Matchers: []string{`node=~".*"`}}}
		}), "every one matches an empty label"},
		{pol("am5", 0, nil, func(s *Spec) {
			s.Alertmanager = &Alertmanager{URL: "http://am", Silence: &Silence{Matchers: []string{`node "x"`}}}
		}), "is not a matcher"},
		{pol("d1", 0, nil, func(s *Spec) {
			s.Drain.Escalate = []DrainEscalation{{Action: "evictHarder", NamespaceSelector: &metav1.LabelSelector{}}}
		}), "spec.drain.escalate[0].action"},
		{pol("d2", 0, nil, func(s *Spec) { s.Drain.Escalate = []DrainEscalation{{Action: EscalateDeletePods}} }), "spec.drain.escalate[0].namespaceSelector: is required"},
	} {
		err := Validate(tc.p)
		if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: got %v, want %q", tc.p.Name, err, tc.want)
		}
	}
	if got := (Spec{}).MaxUnavailable(10); got != -1 {
		t.Errorf("unset maxUnavailable: %d", got)
	}
	if got := (Spec{Health: Health{MaxUnavailable: &pct}}).MaxUnavailable(10); got != 3 {
		t.Errorf("25%% of 10 rounds up to 3, got %d", got)
	}
}

func TestFromUnstructured(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kustodian.io/v1alpha1", "kind": "MaintenancePolicy",
		"metadata": map[string]any{"name": "zones", "namespace": "kustodian"},
		"spec": map[string]any{"groupBy": "zone", "concurrency": int64(2), "spacing": "5m",
			"windows":    []any{map[string]any{"days": []any{"Sat"}, "start": "02:00", "end": "06:00", "timeZone": "Europe/Berlin"}},
			"health":     map[string]any{"maxUnavailable": "25%", "blockedAfter": "30m"},
			"autoscaler": map[string]any{"protect": true}},
	}}
	p, err := FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "zones" || p.Spec.Slots() != 2 || p.Spec.SpacingDuration() != 5*time.Minute || p.Spec.BlockedAfterDuration() != 30*time.Minute ||
		p.Spec.Windows[0].TimeZone != "Europe/Berlin" || p.Spec.Health.MaxUnavailable.String() != "25%" || !p.Spec.Autoscaler.Protect {
		t.Errorf("decoded %+v", p)
	}
	u.Object["spec"] = map[string]any{"concurrency": "two"}
	if _, err := FromUnstructured(u); err == nil {
		t.Error("a bad spec decoded")
	}
}

func ptr[T any](v T) *T { return &v }
