package notify

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/notify/notifytest"
)

// receiver is a real HTTP server standing in for a webhook: it keeps
// what it was sent and answers with the status of fail (500 while
// fail > 0, counting down) or 200 and body.
type receiver struct {
	mu     sync.Mutex
	got    []request
	fail   int
	body   string
	arrive chan struct{}
}

type request struct {
	path, contentType string
	body              []byte
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.got = append(r.got, request{path: req.URL.Path, contentType: req.Header.Get("Content-Type"), body: b})
	failing := r.fail > 0
	if failing {
		r.fail--
	}
	r.mu.Unlock()
	select {
	case r.arrive <- struct{}{}:
	default:
	}
	if failing {
		http.Error(w, "down for a moment", http.StatusInternalServerError)
		return
	}
	_, _ = io.WriteString(w, r.body)
}

func newReceiver() *receiver { return &receiver{arrive: make(chan struct{}, 100)} }

// requests waits until n requests arrived (or fails the test at the
// deadline) and returns them.
func (r *receiver) requests(t *testing.T, n int) []request {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		r.mu.Lock()
		got := append([]request(nil), r.got...)
		r.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-r.arrive:
		case <-deadline:
			t.Fatalf("%d requests arrived, want %d", len(got), n)
		}
	}
}

func quiet() (*slog.Logger, *bytes.Buffer) {
	var b bytes.Buffer
	return slog.New(slog.NewTextHandler(&syncWriter{w: &b}, nil)), &b
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

var failedData = Data{Event: Failed, Node: "node-3", Reason: "kernel 6.1.0-30", Message: "job apt (run 1): failed, exit 100: E: broken packages",
	Time: time.Unix(1800000000, 0), Requested: time.Unix(1799999400, 0), Duration: 10 * time.Minute}

// A generic webhook gets the rendered message, as JSON when asked.
func TestGenericWebhook(t *testing.T) {
	r := newReceiver()
	srv := httptest.NewServer(r)
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	log, _ := quiet()
	s, err := New(Settings{
		URLs:      []string{"generic://" + host + "/hooks/kustodian?disabletls=yes&template=json"},
		Templates: DefaultTemplates,
	}, log)
	if err != nil {
		t.Fatal(err)
	}
	s.Notify(failedData)
	s.Close(10 * time.Second)
	got := r.requests(t, 1)
	if got[0].path != "/hooks/kustodian" || got[0].contentType != "application/json" {
		t.Errorf("request to %s as %s", got[0].path, got[0].contentType)
	}
	var payload map[string]string
	if err := json.Unmarshal(got[0].body, &payload); err != nil {
		t.Fatalf("payload %s: %v", got[0].body, err)
	}
	want := "Kustodian: the maintenance of node-3 FAILED: job apt (run 1): failed, exit 100: E: broken packages"
	if payload["message"] != want {
		t.Errorf("payload %q, want message %q", payload, want)
	}
}

// A receiver that fails twice gets the message on the third attempt; one
// that always fails is tried Attempts times per message and logged once,
// without the URL's secrets; one that comes back is said to.
func TestRetriesAndLogsOnce(t *testing.T) {
	r := newReceiver()
	r.fail = 2
	srv := httptest.NewServer(r)
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	log, logged := quiet()
	raw := "generic://s3cr3tuser:s3cr3tpass@" + host + "/hook/T0K3N?disabletls=yes"
	s, err := New(Settings{URLs: []string{raw}, Templates: DefaultTemplates, Attempts: 3, Retry: 10 * time.Millisecond}, log)
	if err != nil {
		t.Fatal(err)
	}
	s.Notify(failedData)
	if got := r.requests(t, 3); len(got) != 3 || !strings.Contains(string(got[2].body), "FAILED") {
		t.Fatalf("%d requests", len(got))
	}
	if strings.Contains(logged.String(), "not delivered") {
		t.Errorf("a delivered message was logged as lost:\n%s", logged)
	}

	r.mu.Lock()
	r.fail = 6 // two messages, three attempts each
	r.mu.Unlock()
	s.Notify(failedData)
	s.Notify(failedData)
	r.requests(t, 9)
	s.Notify(failedData) // delivered: the URL is back
	s.Close(10 * time.Second)
	if got := r.requests(t, 10); len(got) != 10 {
		t.Errorf("%d requests, want 10", len(got))
	}
	out := logged.String()
	if n := strings.Count(out, "not delivered"); n != 1 {
		t.Errorf("%d lines say a message was not delivered, want 1:\n%s", n, out)
	}
	if !strings.Contains(out, "delivered again") {
		t.Errorf("the URL's return is not said:\n%s", out)
	}
	for _, secret := range []string{"s3cr3tuser", "s3cr3tpass", "T0K3N"} {
		if strings.Contains(out, secret) {
			t.Errorf("the log shows %q:\n%s", secret, out)
		}
	}
}

// Notify never waits for a receiver: one that hangs leaves the agent
// free, its queue is bounded, and Close gives up at its deadline.
func TestNeverBlocks(t *testing.T) {
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case <-hang:
		case <-req.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hang)
	host := strings.TrimPrefix(srv.URL, "http://")
	log, logged := quiet()
	s, err := New(Settings{URLs: []string{"generic://" + host + "/?disabletls=yes"}, Templates: DefaultTemplates,
		Queue: 2, SendTimeout: 200 * time.Millisecond, Retry: 10 * time.Millisecond}, log)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range 10 {
		s.Notify(failedData)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("10 notifications took %s", d)
	}
	start = time.Now()
	s.Close(300 * time.Millisecond)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Close took %s", d)
	}
	out := logged.String()
	if !strings.Contains(out, "notification dropped") || !strings.Contains(out, "not all sent") {
		t.Errorf("the log does not say what was lost:\n%s", out)
	}
}

// Bad input is refused at start, naming what is wrong and never showing
// a URL's secrets.
func TestRefusals(t *testing.T) {
	log, _ := quiet()
	for name, tc := range map[string]struct {
		s    Settings
		want string
	}{
		"unknown service":  {Settings{URLs: []string{"nosuch://tok3nsecret@host"}}, "URL 1 (nosuch): "},
		"bad slack token":  {Settings{URLs: []string{"slack://hook:sh0rtsecret@webhook"}}, "URL 1 (slack): "},
		"token as host":    {Settings{URLs: []string{"pushbullet://sh0rtsecret"}}, "URL 1 (pushbullet): "},
		"unknown field":    {Settings{Templates: map[Event]string{Failed: "{{.Nodename}}"}}, "template of failed: "},
		"template syntax":  {Settings{Templates: map[Event]string{Started: "{{.Node"}}, "template of started: "},
		"no such function": {Settings{Templates: map[Event]string{Blocked: "{{upper .Node}}"}}, "template of blocked: "},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(tc.s, log)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "secret") {
				t.Errorf("error %v, want one starting %q without the secret", err, tc.want)
			}
		})
	}
	for _, ev := range Events {
		if _, err := ParseTemplate(ev, DefaultTemplates[ev]); err != nil {
			t.Errorf("default template of %s: %v", ev, err)
		}
	}
}

// A URL whose receiver cannot be reached: the error names the address it
// dialled, and the log shows none of it, query tokens included.
func TestFailuresNeverShowSecrets(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now: connection refused
	log, logged := quiet()
	raw := "generic://" + addr + "/hooks/s3cretpath?token=S3CRETQUERY&disabletls=yes"
	s, err := New(Settings{URLs: []string{raw}, Templates: DefaultTemplates, Attempts: 1}, log)
	if err != nil {
		t.Fatal(err)
	}
	s.Notify(failedData)
	s.Close(10 * time.Second)
	out := logged.String()
	if !strings.Contains(out, "not delivered") || !strings.Contains(out, "URL 1 (generic)") {
		t.Fatalf("the failure is not logged:\n%s", out)
	}
	for _, secret := range []string{"S3CRETQUERY", "s3cretpath", addr} {
		if strings.Contains(out, secret) {
			t.Errorf("the log shows %q:\n%s", secret, out)
		}
	}
}

func TestMain(m *testing.M) { notifytest.Main(m.Run, func(p string) { Helper = p }) }
