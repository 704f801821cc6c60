package integration

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
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
	t.Parallel()
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
	listen := freeAddress(t)
	a := newAgent(t, e, nodes[0], "--metrics-textfile", textfile, "--metrics-listen", listen)

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
	// While it runs, the agent serves the same metrics over HTTP, and
	// Prometheus's own checker accepts what it serves.
	live := scrape(e, "http://"+listen+"/metrics", `kustodian_state{state="InMaintenance"} 1`)
	promtoolAccepts(t, live)
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
	if b, err := os.ReadFile(textfile); err != nil {
		t.Fatal(err)
	} else if strings.Contains(string(b), "kustodian_last_success_timestamp_seconds 0\n") {
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

// freeAddress is an address on 127.0.0.1 with a port free a moment ago.
func freeAddress(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// scrape waits until url serves a page with the line, and returns it.
func scrape(e *cluster.Env, url, line string) []byte {
	e.T.Helper()
	var page []byte
	e.Eventually(url+" serves "+line, cluster.DefaultTimeout, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: %s", resp.Status, b)
		}
		if !bytes.Contains(b, []byte("\n"+line+"\n")) {
			return fmt.Errorf("no line %q in:\n%s", line, b)
		}
		page = b
		return nil
	})
	return page
}

// promtoolAccepts runs `promtool check metrics` (Debian's, unpacked by the
// Makefile into the cache and put on PATH) on a page of metrics.
func promtoolAccepts(t *testing.T, page []byte) {
	t.Helper()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not on PATH (make test-integration unpacks it from Debian's prometheus package into ~/.cache/kustodian/tools/prometheus/usr/bin)")
	}
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = bytes.NewReader(page)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s\non:\n%s", err, out, page)
	}
}
