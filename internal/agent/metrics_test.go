package agent

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/kustodian/kustodian/internal/metrics"
)

// A running agent writes its metrics on its own every metricsRefresh, so
// that their update time tells a live agent, even one that cannot reach
// the API server and so takes no step.
func TestMetricsRefreshWithoutSteps(t *testing.T) {
	dir := t.TempDir()
	textfile := filepath.Join(dir, "kustodian.prom")
	m, err := metrics.Open(dir, textfile)
	if err != nil {
		t.Fatal(err)
	}
	clk := testingclock.NewFakeClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	a := &Agent{metrics: metricSide{store: m}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), clock: clk, now: clk.Now}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.refreshMetrics(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("refreshMetrics set no ticker")
		}
		time.Sleep(time.Millisecond) // polling the fake clock, not waiting for a time
	}
	if _, err := os.Stat(textfile); err == nil {
		t.Fatal("the textfile was written before metricsRefresh passed")
	}
	clk.Step(metricsRefresh)
	for {
		if b, err := os.ReadFile(textfile); err == nil && strings.Contains(string(b), "kustodian_metrics_updated_timestamp_seconds") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no textfile written without a step")
		}
		time.Sleep(10 * time.Millisecond) // polling the file, not waiting for a time
	}
	cancel()
	<-done
}
