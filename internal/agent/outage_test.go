package agent

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kustodian/kustodian/internal/config"
)

// What a probe's failure says: a refused connection or a 5xx is an API
// server away; a time-out or a proxy's 504 is one that may only be slow.
func TestAProbeTellsAnAbsentAPIServerFromASlowOne(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: closed})
	if err != nil {
		t.Fatal(err)
	}
	a := New(Options{Config: config.Defaults(), NodeName: "n1", Kube: kube, Log: slog.New(slog.DiscardHandler), Notifier: noNotify{}})
	if err := a.readyz(context.Background()); err == nil || !surelyAway(err) {
		t.Errorf("a refused connection: %v, want it taken for away", err)
	}
	for _, c := range []struct {
		code int
		away bool
	}{{http.StatusServiceUnavailable, true}, {http.StatusInternalServerError, true}, {http.StatusGatewayTimeout, false}} {
		a := startingAgent(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(c.code) }), slog.DiscardHandler)
		err := a.readyz(context.Background())
		if err == nil || surelyAway(err) != c.away {
			t.Errorf("/readyz answered %d: %v, want away at once %v", c.code, err, c.away)
		}
	}
	// One that does not answer in time: on the agent's clock.
	clk := testingclock.NewFakeClock(time.Now())
	hung := make(chan struct{})
	a = clockedAgent(t, clk, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		hung <- struct{}{}
		<-r.Context().Done()
	}), slog.DiscardHandler)
	got := make(chan error, 1)
	go func() { got <- a.readyzWithin(context.Background(), 5*time.Second) }()
	<-hung
	clk.Step(5 * time.Second)
	err = <-got
	if err == nil || surelyAway(err) || !strings.Contains(err.Error(), "did not answer within 5s") {
		t.Errorf("a /readyz that does not answer: %v, want a time-out not taken for away at once", err)
	}
}

// The verdicts, probe by probe: time-outs make an API server away only
// after awayAfter, each probe allowed longer; a refusal at once.
func TestAnAPIServerThatDoesNotAnswerIsAwayOnlyAfterHalfAMinute(t *testing.T) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	late := errors.New("/readyz did not answer within 3s")
	unknownHost := &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", IsNotFound: true}}
	var o outage
	steps := []struct {
		after   time.Duration
		err     error
		verdict int
		timeout time.Duration // of the next probe
	}{
		{0, nil, answered, 3 * time.Second},
		{4 * time.Second, late, slow, 6 * time.Second},
		{7 * time.Second, late, slowStill, 12 * time.Second},
		{13 * time.Second, late, slowStill, 12 * time.Second},
		{13 * time.Second, nil, answered, 3 * time.Second},
		{4 * time.Second, late, slow, 6 * time.Second},
		{29 * time.Second, late, slowStill, 12 * time.Second},
		{time.Second, late, wentAway, 3 * time.Second},
		{time.Second, late, awayStill, 3 * time.Second},
		{time.Second, nil, back, 3 * time.Second},
		{time.Second, unknownHost, wentAway, 3 * time.Second},
		{time.Second, nil, back, 3 * time.Second},
	}
	for i, s := range steps {
		at = at.Add(s.after)
		if v := o.probed(at, s.err); v != s.verdict {
			t.Fatalf("probe %d (%v): verdict %d, want %d", i, s.err, v, s.verdict)
		}
		if o.timeout() != s.timeout {
			t.Errorf("after probe %d the next may take %s, want %s", i, o.timeout(), s.timeout)
		}
	}
}

// An API server too loaded to answer a few probes in time is waited for,
// not read whole again when it answers: that read, by every agent of a
// fleet at once, adds to the load that slowed it.
func TestASlowAPIServerIsWaitedForAndNotReadAnew(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	var mu sync.Mutex
	calls := map[string]int{}
	slowFor := 2 // /readyz probes left unanswered
	srv := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls[r.URL.Path]++
		hang := r.URL.Path == "/readyz" && slowFor > 0
		if hang {
			slowFor--
		}
		mu.Unlock()
		if hang {
			<-r.Context().Done()
			return
		}
		w.Write([]byte("ok"))
	})
	var logs bytes.Buffer
	a := clockedAgent(t, clk, srv, slog.NewTextHandler(&lockedWriter{w: &logs}, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- a.rideOut(ctx, 0) }()
	if err := driveClock(ctx, clk, done); err != nil {
		t.Fatalf("rideOut: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("rideOut did not end within 20 s")
	}
	mu.Lock()
	defer mu.Unlock()
	if calls["/readyz"] != 3 {
		t.Errorf("/readyz asked %d times, want 3 (two unanswered, one answered)", calls["/readyz"])
	}
	if len(calls) != 1 {
		t.Errorf("the agent asked %v: it read the cluster anew after a slow answer", calls)
	}
	if s := logs.String(); !strings.Contains(s, "slow to answer") || strings.Contains(s, "away") {
		t.Errorf("the agent did not say the API server was slow, or took it for away:\n%s", s)
	}
}

// driveClock moves clk on while its timers wait, until done says.
func driveClock(ctx context.Context, clk *testingclock.FakeClock, done <-chan error) error {
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if clk.HasWaiters() {
				clk.Step(100 * time.Millisecond)
			}
		}
	}
}

// clockedAgent is startingAgent on clk.
func clockedAgent(t *testing.T, clk *testingclock.FakeClock, h http.Handler, log slog.Handler) *Agent {
	a := startingAgent(t, h, log)
	a.clock, a.now = clk, clk.Now
	return a
}

// lockedWriter is a writer safe for the agent's goroutines and the test.
type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
