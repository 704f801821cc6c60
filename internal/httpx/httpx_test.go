package httpx

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// An answer is read up to MaxAnswer, however long the server goes on; a
// server that cannot be reached is named in the error.
func TestExchangeBoundsTheAnswer(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("x", 1<<20))
		for range 12 {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, b, err := Exchange(srv.Client(), req, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || len(b) != MaxAnswer {
		t.Fatalf("status %d, %d bytes read; want 200 and %d", resp.StatusCode, len(b), MaxAnswer)
	}
	srv.Close()
	req, _ = http.NewRequest(http.MethodGet, srv.URL, nil)
	if _, _, err := Exchange(nil, req, "http://am.example:9093/api/v2/alerts"); err == nil || !strings.HasPrefix(err.Error(), "http://am.example:9093/api/v2/alerts unreachable: ") {
		t.Fatalf("a closed server: %v", err)
	}
}
