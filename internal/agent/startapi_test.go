package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kustodian/kustodian/internal/config"
)

// startServer answers what an agent reads before it starts, as a busy
// API server does: each path in busy is refused with 429 (no Retry-After,
// so client-go does not retry it itself) that many times first.
type startServer struct {
	mu    sync.Mutex
	busy  map[string]int
	calls map[string]int
}

func (s *startServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.calls[r.URL.Path]++
	refuse := s.busy[r.URL.Path] > 0
	if refuse {
		s.busy[r.URL.Path]--
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if refuse {
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429,"message":"the server has received too many requests and has asked us to try again later"}`)
		return
	}
	switch {
	case r.URL.Path == "/readyz":
		fmt.Fprint(w, "ok")
	case r.URL.Path == "/api/v1/namespaces/kustodian":
		fmt.Fprint(w, `{"kind":"Namespace","apiVersion":"v1","metadata":{"name":"kustodian"}}`)
	case r.URL.Path == "/apis/coordination.k8s.io/v1/namespaces/kustodian/leases":
		fmt.Fprint(w, `{"kind":"LeaseList","apiVersion":"coordination.k8s.io/v1","metadata":{"resourceVersion":"1"},"items":[]}`)
	case r.URL.Path == "/api/v1/nodes/n1":
		fmt.Fprint(w, `{"kind":"Node","apiVersion":"v1","metadata":{"name":"n1"}}`)
	case r.URL.Path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews":
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"kind":"SelfSubjectAccessReview","apiVersion":"authorization.k8s.io/v1","status":{"allowed":true}}`)
	default:
		http.NotFound(w, r)
	}
}

// startingAgent is the agent of node n1 in namespace kustodian, talking
// to an API server played by h (stopped with the test).
func startingAgent(t *testing.T, h http.Handler, log slog.Handler) *Agent {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: ts.URL})
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.Namespace = "kustodian"
	return New(Options{Config: cfg, NodeName: "n1", Kube: kube, Log: slog.New(log), Notifier: noNotify{}})
}

// An agent that starts while the API server turns requests away (429, as
// a control plane does when a whole fleet starts at once) waits and asks
// again; it does not exit. Seen with 2,000 agents starting together: two
// of them stopped for good on a 429.
func TestAStartingAgentWaitsOutABusyAPIServer(t *testing.T) {
	srv := &startServer{calls: map[string]int{}, busy: map[string]int{
		"/apis/coordination.k8s.io/v1/namespaces/kustodian/leases": 2,
		"/api/v1/nodes/n1": 1,
	}}
	var logs bytes.Buffer
	a := startingAgent(t, srv, slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.untilStarted(ctx, a.apiReady); err != nil {
		t.Fatalf("the start: %v (it should have asked again)", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the start gave up at the deadline")
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if got := srv.calls["/apis/coordination.k8s.io/v1/namespaces/kustodian/leases"]; got != 4 {
		t.Errorf("the Leases were listed %d times, want 4 (two refusals, an answer, and again after the Node's refusal: each look is whole)", got)
	}
	if got := srv.calls["/api/v1/nodes/n1"]; got != 2 {
		t.Errorf("the Node was read %d times, want 2", got)
	}
	if !strings.Contains(logs.String(), "too many requests") {
		t.Errorf("the agent did not say why it waits:\n%s", logs.String())
	}
}

// A permanent answer still ends the start at once: the Node missing.
func TestAStartingAgentStopsWhenItsNodeIsMissing(t *testing.T) {
	srv := &startServer{calls: map[string]int{}, busy: map[string]int{}}
	mux := http.NewServeMux()
	mux.Handle("/", srv)
	mux.HandleFunc("/api/v1/nodes/n1", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"nodes \"n1\" not found"}`)
	})
	a := startingAgent(t, mux, slog.DiscardHandler)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := a.untilStarted(ctx, a.apiReady)
	if err == nil || !strings.Contains(err.Error(), `node "n1" does not exist`) {
		t.Fatalf("the start: %v, want the missing Node named", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the start waited for the deadline instead of stopping")
	}
}

// Stopped while the API server still turns it away, the start ends
// without an error: systemd stopped it, nothing failed.
func TestAStartingAgentStoppedWhileWaitingEndsWithoutError(t *testing.T) {
	const leases = "/apis/coordination.k8s.io/v1/namespaces/kustodian/leases"
	srv := &startServer{calls: map[string]int{}, busy: map[string]int{leases: 1 << 30}}
	a := startingAgent(t, srv, slog.DiscardHandler)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan error, 1)
	go func() { started <- a.untilStarted(ctx, a.startReading) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		srv.mu.Lock()
		asked := srv.calls[leases]
		srv.mu.Unlock()
		if asked >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent did not ask for the Leases twice within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("a start stopped while waiting returned %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the start did not end within 30 s of its stop")
	}
}

// A busy API server (429) is there: its probe says so, and an informer's
// watch refused with 429 does not make the agent ask whether it is away
// (which, when it answered, would read the whole cluster again: seen with
// 1,000 agents, a third of them did so on a loaded control plane).
func TestABusyAPIServerIsNotTakenForAnAbsentOne(t *testing.T) {
	for _, c := range []struct {
		code int
		away bool
	}{{http.StatusTooManyRequests, false}, {http.StatusServiceUnavailable, true}, {http.StatusOK, false}} {
		a := startingAgent(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if c.code == http.StatusTooManyRequests {
				w.Header().Set("Retry-After", "0")
			}
			w.WriteHeader(c.code)
		}), slog.NewTextHandler(io.Discard, nil))
		if err := a.readyz(context.Background()); (err != nil) != c.away {
			t.Errorf("/readyz answered %d: %v, want away %v", c.code, err, c.away)
		}
	}
	a := startingAgent(t, http.NotFoundHandler(), slog.NewTextHandler(io.Discard, nil))
	ctx := context.Background()
	r := cache.NewReflector(&cache.ListWatch{}, &corev1.Pod{}, cache.NewStore(cache.MetaNamespaceKeyFunc), 0)
	a.watchError(ctx, r, apierrors.NewTooManyRequests("busy", 1))
	select {
	case <-a.signals.watchBroken:
		t.Fatal("a watch refused with 429 makes the agent ask whether the API server is away")
	default:
	}
	a.watchError(ctx, r, errors.New("connection refused"))
	select {
	case <-a.signals.watchBroken:
	default:
		t.Fatal("a watch that could not connect does not make the agent ask whether the API server is away")
	}
}
