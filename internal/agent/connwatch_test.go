package agent

import (
	"context"
	"errors"
	"net/http"
	"testing"
)

type failingTransport struct{}

func (failingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("dial tcp 127.0.0.1:6443: connect: connection refused")
}

// A request that cannot reach the API server tells the agent; one its
// caller gave up on does not.
func TestConnWatchTellsOfFailedRequests(t *testing.T) {
	w := NewConnWatch()
	rt := w.Wrap(failingTransport{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://127.0.0.1:6443/readyz", nil)
	if _, err := rt.RoundTrip(req); err == nil {
		t.Fatal("the request succeeded")
	}
	select {
	case <-w.failed:
		t.Fatal("a cancelled request was told as a failure")
	default:
	}
	req, _ = http.NewRequest(http.MethodGet, "https://127.0.0.1:6443/api/v1/nodes?watch=true", nil)
	for i := 0; i < 3; i++ {
		_, _ = rt.RoundTrip(req) // never blocks, however many fail
	}
	select {
	case <-w.failed:
	default:
		t.Fatal("a refused request was not told")
	}
}
