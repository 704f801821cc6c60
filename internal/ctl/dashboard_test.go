package ctl

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/status"
	"github.com/kustodian/kustodian/internal/status/statustest"
)

func TestTheDashboardServesItsPageReadOnlyToTheLoopback(t *testing.T) {
	s := status.Build(statustest.Fixture())
	d := newDashboard([]*feed{{current: func() status.MaintenanceStatus { return s }}}, 6*time.Hour, true)
	get := func(method, host, path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, "http://"+host+path, nil)
		rec := httptest.NewRecorder()
		d.ServeHTTP(rec, req)
		return rec
	}
	page := get(http.MethodGet, "127.0.0.1:8642", "/")
	body := page.Body.String()
	csp := page.Header().Get("Content-Security-Policy")
	if page.Code != http.StatusOK || !strings.Contains(body, `<main id="live">`) || !strings.Contains(body, "new EventSource") ||
		!strings.Contains(csp, "default-src 'none'") || !strings.Contains(body, `<script nonce="`+strings.TrimSuffix(strings.SplitN(csp, "'nonce-", 2)[1], "'; connect-src 'self'")+`"`) {
		t.Errorf("GET /: %d, CSP %q\n%s", page.Code, csp, body)
	}
	if live := get(http.MethodGet, "localhost:8642", "/live"); live.Code != http.StatusOK || strings.Contains(live.Body.String(), "<script") || !strings.Contains(live.Body.String(), "<svg") {
		t.Errorf("GET /live: %d\n%s", live.Code, live.Body.String())
	}
	if rec := get(http.MethodPost, "127.0.0.1:8642", "/"); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", rec.Code)
	}
	if rec := get(http.MethodGet, "rebound.example:8642", "/"); rec.Code != http.StatusMisdirectedRequest {
		t.Errorf("GET with a foreign Host: %d", rec.Code)
	}
	if rec := get(http.MethodGet, "127.0.0.1:8642", "/nothing"); rec.Code != http.StatusNotFound {
		t.Errorf("GET /nothing: %d", rec.Code)
	}
}

func TestTheDashboardSaysEachChange(t *testing.T) {
	s := status.Build(statustest.Fixture())
	d := newDashboard([]*feed{{current: func() status.MaintenanceStatus { return s }}}, time.Hour, true)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	changes := make(chan struct{})
	go d.follow(ctx, changes)
	srv := httptest.NewServer(d)
	defer srv.Close()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	changes <- struct{}{}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "data: 1\n" {
		t.Errorf("the first event: %q, %v", line, err)
	}
}

func TestTheDashboardOfSeveralClustersHasASectionEach(t *testing.T) {
	s := status.Build(statustest.Fixture())
	d := newDashboard([]*feed{
		{name: "one", ring: "canary", current: func() status.MaintenanceStatus { return s }},
		{name: "two", err: errors.New(`Get "https://127.0.0.1:1/api": dial tcp 127.0.0.1:1: connect: connection refused`)},
		{name: "three"},
	}, time.Hour, true)
	body := d.body()
	for _, want := range []string{`<section data-cluster="one">`, "cluster one (ring canary): namespace", "<svg",
		`<section data-cluster="two">`, "cluster two", "unreachable: Get", `<section data-cluster="three">`, "being read"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q:\n%s", want, body)
		}
	}
	if d.title() != "Kustodian: 3 clusters" {
		t.Errorf("title %q", d.title())
	}
}
