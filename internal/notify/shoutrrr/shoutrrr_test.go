package shoutrrr

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

type request struct {
	path string
	body []byte
}

// receiver is a real HTTPS server standing in for Slack.
type receiver struct {
	mu   sync.Mutex
	got  []request
	body string
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.got = append(r.got, request{path: req.URL.Path, body: b})
	r.mu.Unlock()
	_, _ = io.WriteString(w, r.body)
}

func newReceiver() *receiver { return &receiver{} }

// Slack's incoming webhooks: shoutrrr posts to hooks.slack.com over TLS;
// here the dial goes to a local TLS server that answers as Slack does
// ("ok") and checks the shape Slack reads.
func TestSlackWebhook(t *testing.T) {
	r := newReceiver()
	r.body = "ok"
	srv := httptest.NewTLSServer(r)
	defer srv.Close()
	tlsConf := srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	tlsConf.ServerName = "example.com" // what httptest's certificate names
	addr := srv.Listener.Addr().String()
	saved := http.DefaultTransport
	t.Cleanup(func() { http.DefaultTransport = saved })
	http.DefaultTransport = &http.Transport{
		TLSClientConfig: tlsConf,
		DialContext: func(ctx context.Context, network, hostport string) (net.Conn, error) {
			if hostport != "hooks.slack.com:443" {
				return nil, fmt.Errorf("test: no dialing %s", hostport)
			}
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}

	raw := "slack://hook:WNA3PBYV6-F20DUQND3RQ-Webc4MAvoacrpPakR8phF0zi@webhook?botname=kustodian&color=danger"
	if err := Check(raw); err != nil {
		t.Fatal(err)
	}
	if err := Send(raw, "Kustodian: the maintenance of node-3 FAILED: drain timed out"); err != nil {
		t.Fatal(err)
	}
	got := r.got
	if len(got) != 1 {
		t.Fatalf("%d requests arrived, want 1", len(got))
	}
	if got[0].path != "/services/WNA3PBYV6/F20DUQND3RQ/Webc4MAvoacrpPakR8phF0zi" {
		t.Errorf("posted to %s", got[0].path)
	}
	var payload struct {
		Username    string `json:"username"`
		Attachments []struct {
			Text  string `json:"text"`
			Color string `json:"color"`
		} `json:"attachments"`
	}
	if err := json.Unmarshal(got[0].body, &payload); err != nil {
		t.Fatalf("payload %s: %v", got[0].body, err)
	}
	if len(payload.Attachments) != 1 || !strings.Contains(payload.Attachments[0].Text, "node-3 FAILED") ||
		payload.Attachments[0].Color != "danger" || payload.Username != "kustodian" {
		t.Errorf("Slack payload %s", got[0].body)
	}
}

// A URL shoutrrr does not accept is refused without its secrets.
func TestRefusalsNeverShowSecrets(t *testing.T) {
	for _, raw := range []string{"nosuch://tok3nsecret@host", "slack://hook:sh0rtsecret@webhook", "pushbullet://sh0rtsecret"} {
		err := Check(raw)
		if err == nil || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: error %v, want a refusal without the secret", raw, err)
		}
	}
}
