package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/cluster"
)

// webhook is a real HTTP server standing in for a generic webhook: it
// keeps the messages the agents post, in order, answering each after
// 300 ms.
type webhook struct {
	mu   sync.Mutex
	msgs []string
	srv  *httptest.Server
}

func newWebhook(t *testing.T) *webhook {
	w := &webhook{}
	w.srv = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var payload struct {
			Message string `json:"message"`
		}
		if err := json.Unmarshal(b, &payload); err != nil || r.URL.Path != "/kustodian" {
			t.Errorf("the webhook got %s %s: %s", r.Method, r.URL.Path, b)
			http.Error(rw, "bad request", http.StatusBadRequest)
			return
		}
		// A slow receiver: a message counts as delivered only if the
		// sender waits for the answer (an agent that exits without
		// waiting closes the connection first).
		select {
		case <-time.After(300 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
		w.mu.Lock()
		w.msgs = append(w.msgs, payload.Message)
		w.mu.Unlock()
	}))
	t.Cleanup(w.srv.Close)
	return w
}

// url is the shoutrrr URL of the webhook.
func (w *webhook) url() string {
	return "generic://" + strings.TrimPrefix(w.srv.URL, "http://") + "/kustodian?disabletls=yes&template=json"
}

// says waits until the webhook got messages containing each of want, in
// that order, and nothing else.
func (w *webhook) says(e *cluster.Env, want ...string) {
	e.T.Helper()
	e.Eventually(fmt.Sprintf("the webhook to get %q", want), cluster.DefaultTimeout, func(context.Context) error {
		return w.check(want)
	})
}

func (w *webhook) check(want []string) error {
	w.mu.Lock()
	got := append([]string(nil), w.msgs...)
	w.mu.Unlock()
	if len(got) != len(want) {
		return fmt.Errorf("%d messages: %q", len(got), got)
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			return fmt.Errorf("message %d is %q, want it to contain %q", i+1, got[i], want[i])
		}
	}
	return nil
}

// The agent that lives a maintenance says so through notify.urls: when
// it starts, when it completes (sent before the agent exits), when it
// fails.
func TestNotifications(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(1)
	hook := newWebhook(t)
	a := newAgent(t, e, nodes[0], "--notify-urls", hook.url(),
		"--notify-completed", "{{.Node}} is back after {{.Reason}}")
	a.request("kernel 6.1")
	a.start()
	a.waitInProgress(cluster.DefaultTimeout)
	hook.says(e, "Kustodian: "+nodes[0]+" took the maintenance lock and is draining (kernel 6.1)")
	a.completes()
	a.exitsZero()
	// Sent before the agent exited.
	if err := hook.check([]string{"took the maintenance lock", nodes[0] + " is back after kernel 6.1"}); err != nil {
		t.Errorf("when the agent had exited: %v", err)
	}

	if out, err := runJob(t, a, "--id", "bad", "--", "sh", "-c", "echo 'E: broken packages' >&2; exit 3").CombinedOutput(); err != nil {
		t.Fatalf("kustodian run: %v\n%s", err, out)
	}
	a.start()
	waitRecord(e, nodes[0], "Failed by its job", inState(lock.Failed))
	hook.says(e, "took the maintenance lock", "is back after", "took the maintenance lock",
		"Kustodian: the maintenance of "+nodes[0]+" FAILED: job bad (run 1): failed, exit 3: E: broken packages")
}
