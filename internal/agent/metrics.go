package agent

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/metrics"
)

// openMetrics opens the metrics the earlier runs kept in the state
// directory. Metrics never stop a maintenance: what cannot be read or
// written is logged, and the agent goes on.
func (a *Agent) openMetrics() {
	textfile := a.cfg.MetricsTextfile()
	m, err := metrics.Open(a.cfg.StateDir, textfile)
	if err != nil {
		a.log.Warn("metrics", "err", err)
	}
	a.metrics.store = m
	if m != nil && textfile != "" {
		a.log.Info("metrics go to a node_exporter textfile", "path", textfile)
	}
	a.reported.token.mu.Lock()
	expires := a.reported.token.current.ExpiresAt()
	a.reported.token.mu.Unlock()
	if !expires.IsZero() {
		a.updateMetrics(func(d *metrics.Data) { d.TokenExpires = expires })
	}
}

// updateMetrics changes the metrics and writes them; a failure is logged
// once per kind of failure, not at every transition.
func (a *Agent) updateMetrics(change func(d *metrics.Data)) {
	if a.metrics.store == nil {
		return
	}
	if err := a.metrics.store.Update(change); err != nil {
		msg := err.Error()
		a.drain.mu.Lock()
		said := a.metrics.err == msg
		a.metrics.err = msg
		a.drain.mu.Unlock()
		if !said {
			a.log.Warn("metrics not written", "err", err)
		}
	}
}

// transitionMetrics records what a published state says: the state, the
// lock, the queue position, the gates, and at the edges of a maintenance
// its durations, result and reboots. r is the record as published.
func (a *Agent) transitionMetrics(from, to lock.State, r lock.Record, o decide.Observed, now time.Time) {
	key := fmt.Sprint(from, to, r.Since, o.Request != nil, len(o.HeldLocks), a.decision.Position, a.decision.Gates)
	if from == to && key == a.metrics.key {
		return // nothing new: no write
	}
	a.metrics.key = key
	a.updateMetrics(func(d *metrics.Data) {
		d.SetState(string(to), r.Since)
		d.Requested = o.Request != nil
		d.LockHeld = len(o.HeldLocks) > 0
		d.QueuePosition = 0
		d.Blocked = nil
		if to == lock.Waiting {
			d.QueuePosition = a.decision.Position
			d.Blocked = map[string]bool{}
			for _, g := range a.decision.Gates {
				if g.Verdict != decide.Unchecked {
					d.Blocked[g.Gate] = g.Verdict == decide.Closed
				}
			}
		}
		if from == to {
			return
		}
		switch {
		case from == lock.Waiting && to == lock.Draining:
			d.Wait.Observe(now.Sub(r.Requested))
			d.DrainStarted, d.Drained = now, time.Time{}
		case from == lock.Draining && to == lock.InMaintenance:
			if !d.DrainStarted.IsZero() {
				d.Drain.Observe(now.Sub(d.DrainStarted))
			}
			d.Drained = now
		case to == lock.Completing && from != lock.Failed && !d.Drained.IsZero():
			d.Maintenance.Observe(now.Sub(d.Drained))
			d.Drained = time.Time{}
		case to == lock.Rebooting:
			d.Reboots++
		case to == lock.Failed:
			d.Ended(metrics.ResultFailed, now)
		}
	})
}

// metricsRefresh is how often a running agent writes its metrics when
// nothing changes, so that kustodian_metrics_updated_timestamp_seconds
// tells a live agent from a dead one, whether or not it reaches the API
// server.
const metricsRefresh = time.Minute

// refreshMetrics writes the metrics every metricsRefresh until ctx ends.
func (a *Agent) refreshMetrics(ctx context.Context) {
	t := a.clock.NewTicker(metricsRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			a.updateMetrics(func(*metrics.Data) {}) // the update's time is the news
		}
	}
}

// idleKey is metricsKey once the metrics say Idle (transitionMetrics'
// keys never equal it: they name two states).
const idleKey = "idle"

// idleMetrics records the node back to Idle, and a maintenance that
// succeeded when it did.
func (a *Agent) idleMetrics(from lock.State, succeeded bool) {
	if from == lock.Idle && a.metrics.key == idleKey {
		return // said already
	}
	a.metrics.key = idleKey
	now := a.now()
	a.updateMetrics(func(d *metrics.Data) {
		if succeeded {
			d.Ended(metrics.ResultSucceeded, now)
		}
		d.SetState(string(lock.Idle), now)
		d.Requested, d.LockHeld, d.QueuePosition, d.Blocked = false, false, 0, nil
		d.DrainStarted, d.Drained = time.Time{}, time.Time{}
	})
}

// evictedMetrics counts pods a drain evicted.
func (a *Agent) evictedMetrics(n int) {
	if n <= 0 {
		return
	}
	a.updateMetrics(func(d *metrics.Data) { d.Evictions += uint64(n) })
}

// serveMetrics serves the metrics on metrics.listen while the agent runs.
// A port that cannot be had is logged, not fatal: the textfile still
// says everything. The returned func stops the server.
func (a *Agent) serveMetrics() (stop func()) {
	addr := a.cfg.Metrics.Listen
	if addr == "" || a.metrics.store == nil {
		return func() {}
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		a.log.Warn("metrics are not served over HTTP (metrics.listen)", "address", addr, "err", err)
		return func() {}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(a.metrics.store.Registry(), promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.log.Warn("metrics endpoint stopped", "err", err)
		}
	}()
	a.log.Info("metrics are served over HTTP", "url", "http://"+ln.Addr().String()+"/metrics")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}
}
