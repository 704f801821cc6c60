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
	t.Parallel()
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
	failed := []string{"took the maintenance lock", "is back after", "took the maintenance lock",
		"Kustodian: the maintenance of " + nodes[0] + " FAILED: job bad (run 1): failed, exit 3: E: broken packages"}
	hook.says(e, failed...)
	// Repaired, the request withdrawn: the node comes back, but that is
	// no completed maintenance.
	a.completes()
	if err := hook.check(failed); err != nil {
		t.Errorf("after the failed node was repaired: %v", err)
	}
}

// kustodian-ctl history lists the maintenances that ended on a node, from
// the annotation its agent writes on its Node, across runs of the agent:
// one that succeeded, one whose job failed.
func TestHistory(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(2)
	if out := mustCtl(t, e, "history"); !strings.Contains(out, "No maintenance has ended") {
		t.Errorf("history of a new cluster:\n%s", out)
	}
	a := newAgent(t, e, nodes[0])
	a.request("kernel 6.1")
	a.start()
	a.waitInProgress(cluster.DefaultTimeout)
	a.completes()
	a.exitsZero()
	if out, err := runJob(t, a, "--id", "bad", "--", "sh", "-c", "echo 'E: broken packages' >&2; exit 3").CombinedOutput(); err != nil {
		t.Fatalf("kustodian run: %v\n%s", err, out)
	}
	a.start()
	waitRecord(e, nodes[0], "Failed by its job", inState(lock.Failed))
	a.completes() // repaired: no second entry, and no success

	var h struct {
		Kind  string `json:"kind"`
		Items []struct {
			Node               string `json:"node"`
			Result             string `json:"result"`
			Reason             string `json:"reason"`
			Message            string `json:"message"`
			Requested          string `json:"requested"`
			Started            string `json:"started"`
			Drained            string `json:"drained"`
			Ended              string `json:"ended"`
			MaintenanceSeconds *int64 `json:"maintenanceSeconds"`
		} `json:"items"`
	}
	e.Eventually("two maintenances in the history", cluster.DefaultTimeout, func(context.Context) error {
		out, err := ctl(t, e, "history", "-o", "json")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		if err := json.Unmarshal([]byte(out), &h); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		if len(h.Items) != 2 {
			return fmt.Errorf("%d items: %s", len(h.Items), out)
		}
		return nil
	})
	ok, failed := h.Items[0], h.Items[1]
	at := func(v string) time.Time {
		t.Helper()
		ts, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			t.Errorf("time %q: %v", v, err)
		}
		return ts
	}
	if h.Kind != "MaintenanceHistory" || ok.Node != nodes[0] || ok.Result != "succeeded" || ok.Reason != "kernel 6.1" ||
		ok.Started == "" || ok.Drained == "" || at(ok.Ended).Before(at(ok.Drained)) || at(ok.Drained).Before(at(ok.Started)) ||
		at(ok.Started).Before(at(ok.Requested)) || ok.MaintenanceSeconds == nil {
		t.Errorf("the maintenance that succeeded: %+v", ok)
	}
	if failed.Result != "failed" || !strings.Contains(failed.Message, "job bad (run 1): failed, exit 3") || at(failed.Requested).Before(at(ok.Ended)) {
		t.Errorf("the maintenance that failed: %+v", failed)
	}
	table := mustCtl(t, e, "history", nodes[0], "-o", "wide")
	for _, want := range []string{"NODE", "REQUESTED", "RESULT", "WAIT", "DRAIN", "MAINTENANCE", "REASON", "MESSAGE",
		"succeeded", "kernel 6.1", "failed", "E: broken packages"} {
		if !strings.Contains(table, want) {
			t.Errorf("history -o wide lacks %q:\n%s", want, table)
		}
	}
	if out := mustCtl(t, e, "history", nodes[1]); !strings.Contains(out, "No maintenance has ended") {
		t.Errorf("history of a node without maintenances:\n%s", out)
	}
	if out, err := ctl(t, e, "history", "no-such-node"); err == nil || !strings.Contains(out, `node "no-such-node" not found`) {
		t.Errorf("history of an unknown node: %v %s", err, out)
	}
}
