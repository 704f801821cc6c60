package integration

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// authRecorder is a server that records the Authorization header of every
// request, answering Alertmanager's and Prometheus' alert lists with none.
type authRecorder struct {
	mu   sync.Mutex
	seen []string
	srv  *httptest.Server
}

func newAuthRecorder(t *testing.T) *authRecorder {
	r := &authRecorder{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.seen = append(r.seen, req.URL.Path+" "+req.Header.Get("Authorization"))
		r.mu.Unlock()
		if req.URL.Path == "/api/v1/alerts" {
			w.Write([]byte(`{"status":"success","data":{"alerts":[]}}`))
			return
		}
		w.Write([]byte(`[]`))
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *authRecorder) requests() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.seen...)
}

// A writer of MaintenancePolicies cannot make the agents read a host file
// or send what a host holds to a place of its choosing: a policy naming a
// credentials file is refused, and an Alertmanager or Prometheus URL that
// the host does not list is never asked (its gate blocks, saying so). The
// URL the host lists gets the credentials the host gives it. (Seen open: a
// policy with credentials.file and a listener's URL made the agent send
// the file's content there.)
func TestPolicyCannotSendHostSecretsElsewhere(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(1)
	nodecreds.Install(e, e.Namespace)
	listed, attacker := newAuthRecorder(t), newAuthRecorder(t)
	secret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(secret, []byte("host-secret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := e.ApplyPolicy(fmt.Sprintf(`{metadata: {name: exfil}, spec: {precedence: 100, alertmanager: {url: %q, credentials: {type: Basic, file: %q}}, blockers: {alertmanager: {}}}}`, attacker.srv.URL, secret))
	if err == nil || !strings.Contains(err.Error(), "credentials are host configuration") {
		t.Fatalf("a policy naming a host file: %v, want refused", err)
	}
	if err := e.ApplyPolicy(fmt.Sprintf(`{metadata: {name: exfil}, spec: {precedence: 100, alertmanager: {url: %q}, blockers: {alertmanager: {}, prometheus: {url: %q}}}}`, attacker.srv.URL, attacker.srv.URL)); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, e, nodes[0], "--gates-poll", "1s",
		"--alertmanager-endpoints", listed.srv.URL+" bearer "+secret, "--prometheus-endpoints", listed.srv.URL+" bearer "+secret)
	a.request("patch")
	a.start()
	waitRecord(e, nodes[0], "to be held by the unlisted URL", inStateSaying(lock.Waiting, "is not allowed by this host"))
	if got := attacker.requests(); len(got) != 0 {
		t.Fatalf("the unlisted URL was asked: %q", got)
	}
	// The URL the host lists, in the same policy: asked with the host's
	// credentials; no alert, so the node goes.
	if err := e.ApplyPolicy(fmt.Sprintf(`{metadata: {name: exfil}, spec: {precedence: 100, alertmanager: {url: %q}, blockers: {alertmanager: {}, prometheus: {url: %q}}}}`, listed.srv.URL, listed.srv.URL+"/")); err != nil {
		t.Fatal(err)
	}
	a.waitInProgress(cluster.DefaultTimeout)
	a.completes()
	got := strings.Join(listed.requests(), "\n")
	for _, want := range []string{"/api/v2/alerts Bearer host-secret-token", "/api/v1/alerts Bearer host-secret-token"} {
		if !strings.Contains(got, want) {
			t.Errorf("the listed URL was asked %q, want %q among them", got, want)
		}
	}
	if got := attacker.requests(); len(got) != 0 {
		t.Errorf("the unlisted URL was asked: %q", got)
	}
	if log := a.logText(); strings.Contains(log, "host-secret-token") {
		t.Errorf("the agent's log shows the host's credentials")
	}
}
