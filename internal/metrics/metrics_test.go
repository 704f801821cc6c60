package metrics

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func open(t *testing.T, dir string) (*Store, string) {
	t.Helper()
	textfile := filepath.Join(dir, "kustodian.prom")
	s, err := Open(dir, textfile)
	if err != nil {
		t.Fatal(err)
	}
	return s, textfile
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func wantLines(t *testing.T, text string, lines ...string) {
	t.Helper()
	have := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		have[l] = true
	}
	for _, l := range lines {
		if !have[l] {
			t.Errorf("no line %q in:\n%s", l, text)
		}
	}
}

// The textfile says the state one-hot, and counters and histograms carry
// over to the next run of the agent.
func TestTextfileAndCarryOver(t *testing.T) {
	dir := t.TempDir()
	s, textfile := open(t, dir)
	at := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	if err := s.Update(func(d *Data) {
		d.SetState("Draining", at)
		d.Requested, d.LockHeld = true, true
		d.Blocked = map[string]bool{"window": false, "health": true}
		d.Wait.Observe(42 * time.Second)
		d.Evictions += 3
	}); err != nil {
		t.Fatal(err)
	}
	wantLines(t, read(t, textfile),
		`kustodian_state{state="Draining"} 1`,
		`kustodian_state{state="Idle"} 0`,
		`kustodian_state_since_timestamp_seconds 1.7955144e+09`,
		`kustodian_lock_held 1`,
		`kustodian_gate_blocked{gate="health"} 1`,
		`kustodian_gate_blocked{gate="window"} 0`,
		`kustodian_evictions_total 3`,
		`kustodian_maintenances_total{result="failed"} 0`,
		`kustodian_wait_duration_seconds_bucket{le="30"} 0`,
		`kustodian_wait_duration_seconds_bucket{le="60"} 1`,
		`kustodian_wait_duration_seconds_bucket{le="+Inf"} 1`,
		`kustodian_wait_duration_seconds_sum 42`,
	)

	// The agent exits; the next run goes on from there.
	s2, _ := open(t, dir)
	if err := s2.Update(func(d *Data) {
		d.SetState("Idle", at.Add(time.Hour))
		d.Ended(ResultSucceeded, at.Add(time.Hour))
		d.Wait.Observe(2 * time.Hour)
		d.Evictions++
	}); err != nil {
		t.Fatal(err)
	}
	wantLines(t, read(t, textfile),
		`kustodian_state{state="Idle"} 1`,
		`kustodian_state{state="Draining"} 0`,
		`kustodian_evictions_total 4`,
		`kustodian_maintenances_total{result="succeeded"} 1`,
		`kustodian_last_success_timestamp_seconds 1.795518e+09`,
		`kustodian_wait_duration_seconds_bucket{le="60"} 1`,
		`kustodian_wait_duration_seconds_bucket{le="7200"} 2`,
		`kustodian_wait_duration_seconds_count 2`,
	)
}

// A metrics file that does not decode is set aside, said, and counting
// starts again: metrics never stop a maintenance.
func TestCorruptFileIsSetAside(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "metrics.json")
	if err := os.WriteFile(path, []byte("{half"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, "")
	if err == nil || !strings.Contains(err.Error(), path+" is corrupt") {
		t.Fatalf("Open: %v, want the corrupt file named", err)
	}
	if s == nil {
		t.Fatal("no store despite a corrupt file")
	}
	if _, err := os.Stat(path + ".corrupt"); err != nil {
		t.Errorf("the corrupt file was not kept aside: %v", err)
	}
}

// The same state again keeps its time: state_since is when it began.
func TestSetStateKeepsTheFirstTime(t *testing.T) {
	var d Data
	t0 := time.Unix(100, 0)
	d.SetState("Waiting", t0)
	d.SetState("Waiting", t0.Add(time.Minute))
	if !d.StateSince.Equal(t0) {
		t.Errorf("state since %v, want %v", d.StateSince, t0)
	}
}

// promtool, Prometheus's own checker, accepts the textfile.
func TestPromtoolAcceptsTheTextfile(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not on PATH (make test-unit unpacks it from Debian's prometheus package into ~/.cache/kustodian/tools/prometheus/usr/bin)")
	}
	dir := t.TempDir()
	s, textfile := open(t, dir)
	if err := s.Update(func(d *Data) {
		d.SetState("Waiting", time.Now())
		d.QueuePosition = 3
		d.Blocked = map[string]bool{"window": true}
		d.Drain.Observe(time.Minute)
		d.Ended(ResultFailed, time.Now())
		d.Deadlines = map[string]Deadline{"cve-2026-1234": {Deadline: time.Now().Add(time.Hour), PredictedEnd: time.Now().Add(2 * time.Hour), AtRisk: true}}
	}); err != nil {
		t.Fatal(err)
	}
	wantLines(t, read(t, textfile), `kustodian_rollout_at_risk{rollout="cve-2026-1234"} 1`)
	cmd := exec.Command(promtool, "check", "metrics")
	cmd.Stdin = strings.NewReader(read(t, textfile))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
}

// node_exporter, Debian's, reads the textfile and serves what it says.
func TestNodeExporterServesTheTextfile(t *testing.T) {
	exe, err := exec.LookPath("prometheus-node-exporter")
	if err != nil {
		t.Fatal("prometheus-node-exporter is not on PATH (make test-unit unpacks it from Debian's package into ~/.cache/kustodian/tools/prometheus/usr/bin)")
	}
	dir := t.TempDir()
	s, _ := open(t, dir)
	if err := s.Update(func(d *Data) {
		d.SetState("InMaintenance", time.Now())
		d.LockHeld = true
		d.Evictions = 7
	}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(exe, "--collector.disable-defaults", "--collector.textfile",
		"--collector.textfile.directory="+dir, "--web.listen-address="+addr)
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var body string
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			b, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil && resp.StatusCode == http.StatusOK {
				body = string(b)
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node_exporter on %s did not answer within 20s: %v\n%s", addr, err, log.String())
		}
		time.Sleep(50 * time.Millisecond) // polling a server that is starting, with a deadline
	}
	wantLines(t, body,
		`kustodian_state{state="InMaintenance"} 1`,
		`kustodian_lock_held 1`,
		`kustodian_evictions_total 7`,
		`node_textfile_scrape_error 0`,
	)
}
