package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kustodian/kustodian/test/cluster"
)

// metricsSay waits until the textfile at path has each line (the agent
// writes it just after it acts), failing the test at the deadline.
func metricsSay(e *cluster.Env, path, when string, lines ...string) {
	e.T.Helper()
	e.Eventually("the textfile "+when, cluster.DefaultTimeout, func(context.Context) error {
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		have := map[string]bool{}
		for _, l := range strings.Split(string(b), "\n") {
			have[l] = true
		}
		var missing []string
		for _, l := range lines {
			if !have[l] {
				missing = append(missing, l)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("no line %q in:\n%s", missing, b)
		}
		return nil
	})
}

// The agent's node_exporter textfile follows a maintenance (state, lock,
// request, pods evicted, durations, result) and carries its counters over
// to the next run of the agent: the agent exits when the node is Idle,
// and what it counted stays scrapeable.
func TestMetricsTextfile(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(2)
	e.Cordon(nodes[1])
	e.Deployment("web", 2)
	on := 0
	for _, p := range e.RunningPods("web", 2) {
		if p.Spec.NodeName == nodes[0] {
			on++
		}
	}
	uncordon(e, nodes[1])
	textfile := filepath.Join(t.TempDir(), "kustodian.prom")
	a := newAgent(t, e, nodes[0], "--metrics-textfile", textfile)

	a.request("kernel")
	a.start()
	a.waitInProgress(cluster.DefaultTimeout)
	metricsSay(e, textfile, "in maintenance",
		`kustodian_state{state="InMaintenance"} 1`,
		`kustodian_state{state="Waiting"} 0`,
		`kustodian_lock_held 1`,
		`kustodian_maintenance_requested 1`,
		fmt.Sprintf("kustodian_evictions_total %d", on),
		`kustodian_wait_duration_seconds_count 1`,
		`kustodian_drain_duration_seconds_count 1`,
		`kustodian_maintenance_duration_seconds_count 0`,
		`kustodian_maintenances_total{result="succeeded"} 0`,
	)
	a.completes()
	metricsSay(e, textfile, "after the maintenance",
		`kustodian_state{state="Idle"} 1`,
		`kustodian_state{state="InMaintenance"} 0`,
		`kustodian_lock_held 0`,
		`kustodian_maintenance_requested 0`,
		`kustodian_maintenance_duration_seconds_count 1`,
		`kustodian_maintenances_total{result="succeeded"} 1`,
		`kustodian_maintenances_total{result="failed"} 0`,
	)
	if b, _ := os.ReadFile(textfile); strings.Contains(string(b), "kustodian_last_success_timestamp_seconds 0\n") {
		t.Errorf("no time of the last success:\n%s", b)
	}

	// The next maintenance, by a new run of the agent, counts on.
	a.request("kernel again")
	a.start()
	a.waitInProgress(cluster.DefaultTimeout)
	a.completes()
	metricsSay(e, textfile, "after the second maintenance",
		`kustodian_state{state="Idle"} 1`,
		`kustodian_wait_duration_seconds_count 2`,
		`kustodian_maintenances_total{result="succeeded"} 2`,
		fmt.Sprintf("kustodian_evictions_total %d", on),
	)
}
