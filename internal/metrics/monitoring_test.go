package metrics

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// examples/monitoring, from this package.
var monitoring = filepath.Join("..", "..", "examples", "monitoring")

func promtool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not on PATH (make test-unit unpacks it from Debian's prometheus package into ~/.cache/kustodian/tools/prometheus/usr/bin)")
	}
	return p
}

// The alert rules are valid, and their tests (alerts_test.yaml: each
// alert fires when it should, not before, and not for a healthy node)
// pass under Prometheus's own rule engine.
func TestAlertRules(t *testing.T) {
	p := promtool(t)
	for _, args := range [][]string{{"check", "rules", "alerts.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		cmd := exec.Command(p, args...)
		cmd.Dir = monitoring
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// dashboard is the part of a Grafana dashboard the test reads.
type dashboard struct {
	Title  string `json:"title"`
	Panels []struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// Every query of the dashboard parses as PromQL (promtool checks each as a
// recording rule, Grafana's variables replaced by values), and every
// metric the dashboard and the alerts name is one the agent writes.
func TestDashboardQueries(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(monitoring, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	grafana := strings.NewReplacer("$__range", "1d", "$__rate_interval", "5m", "$instance", ".*")
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	var exprs []string
	for _, p := range d.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for i, target := range p.Targets {
			expr := grafana.Replace(target.Expr)
			exprs = append(exprs, expr)
			q, _ := json.Marshal(expr) // a JSON string is a YAML string
			fmt.Fprintf(&rules, "      - record: dashboard:%s:%d\n        expr: %s\n", recordName(p.Title), i, q)
		}
	}
	file := filepath.Join(t.TempDir(), "dashboard-queries.yaml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool(t), "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("the dashboard's queries: %v\n%s\n%s", err, out, rules.String())
	}

	alerts, err := os.ReadFile(filepath.Join(monitoring, "alerts.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	known := written(t)
	used := map[string]bool{}
	name := regexp.MustCompile(`kustodian_[a-z_]+`)
	for _, text := range append(exprs, string(alerts)) {
		for _, m := range name.FindAllString(text, -1) {
			base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_sum"), "_count")
			used[base] = true
			if !known[base] {
				t.Errorf("%q is not a metric the agent writes (it writes %v)", m, keys(known))
			}
		}
	}
	// What an operator looks for: progress, queue, durations, failures,
	// blocked reasons.
	for _, want := range []string{"kustodian_state", "kustodian_queue_position", "kustodian_gate_blocked", "kustodian_maintenances_total",
		"kustodian_wait_duration_seconds", "kustodian_drain_duration_seconds", "kustodian_maintenance_duration_seconds"} {
		if !used[want] {
			t.Errorf("the dashboard does not show %s", want)
		}
	}
}

// written is the names of the metrics a Store serves, read from what it
// gathers (not from this package's list of descriptions).
func written(t *testing.T) map[string]bool {
	t.Helper()
	s, _ := open(t, t.TempDir())
	if err := s.Update(func(d *Data) { d.Blocked = map[string]bool{"window": true} }); err != nil {
		t.Fatal(err)
	}
	families, err := prometheus.Gatherers{s.Registry()}.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, f := range families {
		out[f.GetName()] = true
	}
	return out
}

func recordName(title string) string {
	return strings.Trim(regexp.MustCompile(`[^a-zA-Z0-9]+`).ReplaceAllString(strings.ToLower(title), "_"), "_")
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
