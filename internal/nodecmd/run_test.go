package nodecmd

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/jobs"
	"github.com/kustodian/kustodian/internal/metrics"
)

// A failed job's exit code reaches automation as it is, unless it would
// read as "still going" (75) or "blocked" (76), or says nothing (0, none).
func TestFailedJobExitCode(t *testing.T) {
	code := func(c int) *int { return &c }
	for _, tc := range []struct {
		name string
		job  *int
		want int
	}{
		{"its own code", code(4), 4},
		{"a signal's code", code(143), 143},
		{"no code: the command did not start", nil, 1},
		{"zero, yet failed", code(0), 1},
		{"75 would read as pending", code(ExitPending), 1},
		{"76 would read as blocked", code(ExitBlocked), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &jobs.Job{ID: "j", State: jobs.Failed, ExitCode: tc.job}
			ended, err := jobEnded(j, filepath.Join(t.TempDir(), "maintenance-required"))
			var got exitCode
			if !ended || !errors.As(err, &got) {
				t.Fatalf("jobEnded = %v, %v; want ended with an exit code", ended, err)
			}
			if int(got) != tc.want {
				t.Errorf("exit code %d, want %d", got, tc.want)
			}
		})
	}
}

// A pending job says why it waits, from what the agent last kept.
func TestAgentView(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	since := now.Add(-5 * time.Minute)
	submitted := now.Add(-30 * time.Minute)
	for _, tc := range []struct {
		name string
		d    metrics.Data
		at   time.Time
		want string
	}{
		{"not picked up yet", metrics.Data{State: "Idle"}, now.Add(-48 * time.Hour), "the agent has not picked up the request yet (kustodian.path starts it)"},
		{"never picked up", metrics.Data{State: "Idle"}, now.Add(-48 * time.Hour), "the agent has not picked up the request in 30m0s: is kustodian.path enabled? (systemctl status kustodian.path kustodian.service; journalctl -u kustodian.service)"},
		{"queued behind others", metrics.Data{State: "Waiting", StateSince: since, QueuePosition: 3}, now.Add(-20 * time.Second),
			"the agent: Waiting since 2026-11-25T11:55:00Z, position 3 in its queue"},
		{"held by gates", metrics.Data{State: "Waiting", StateSince: since, QueuePosition: 1, Blocked: map[string]bool{"window": true, "spacing": false, "health": true}}, now,
			"the agent: Waiting since 2026-11-25T11:55:00Z, position 1 in its queue, held by health, window (kustodian-ctl status NODE says why)"},
		{"the API server unreachable", metrics.Data{State: "Waiting", StepFailures: 7, FailingSince: since}, now.Add(-time.Minute),
			"the agent: Waiting, its steps failing since 2026-11-25T11:55:00Z (7 in a row: the API server unreachable, or refusing; journalctl -u kustodian.service)"},
		{"the agent stopped", metrics.Data{State: "Idle", StateSince: since}, now.Add(-10 * time.Minute),
			"the agent has written nothing since 2026-11-25T11:50:00Z (10m0s ago), when it was Idle: is it running? (systemctl status kustodian.service; journalctl -u kustodian.service)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := submitted
			if tc.name == "not picked up yet" {
				sub = now.Add(-10 * time.Second)
			}
			if got := agentView(tc.d, tc.at, sub, now); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// `kustodian run --id` of a pending job prints why it is pending, and
// exits 76 only when it is blocked.
func TestFollowExistingSaysWhy(t *testing.T) {
	dir := t.TempDir()
	store := jobs.Store{Dir: filepath.Join(dir, "jobs")}
	j := &jobs.Job{ID: "patch", Command: []string{"/bin/true"}, State: jobs.Pending}
	request := filepath.Join(dir, "maintenance-required")
	for _, tc := range []struct {
		why, blocked string
		code         int
		want         string
	}{
		{"the agent: Waiting, position 2 in its queue", "", ExitPending, "pending: the agent: Waiting, position 2 in its queue\nnot done yet\n"},
		{"", "node-2 holds lock-default-0 and Failed: job exited 3", ExitBlocked, "blocked: node-2 holds lock-default-0 and Failed: job exited 3; "},
	} {
		var out bytes.Buffer
		f := follower{store: store, request: request, out: &out, pending: func(context.Context) (string, string) { return tc.why, tc.blocked }}
		err := f.existing(context.Background(), j, j.Command, false)
		var code exitCode
		if !errors.As(err, &code) || int(code) != tc.code {
			t.Errorf("exit %v, want %d", err, tc.code)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("output\n%s\nlacks %q", out.String(), tc.want)
		}
	}
}

// --wait prints why a pending job waits, exits 76 once it is blocked, 75
// at --timeout, and 0 once it succeeded and the node is given back.
func TestWaitJob(t *testing.T) {
	dir := t.TempDir()
	store := jobs.Store{Dir: filepath.Join(dir, "jobs")}
	request := filepath.Join(dir, "maintenance-required")
	if err := store.Create(&jobs.Job{ID: "patch", Command: []string{"/bin/true"}, State: jobs.Pending}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, why, blocked string
		code               int
		want               string
	}{
		{"timeout", "the agent: Waiting, position 2 in its queue", "", ExitPending, "pending: the agent: Waiting, position 2 in its queue\njob patch not done after 200ms\n"},
		{"blocked", "", "node-2 holds lock-default-0 and Failed: exit 3", ExitBlocked, "blocked: node-2 holds lock-default-0 and Failed: exit 3"},
	} {
		var out bytes.Buffer
		f := follower{store: store, request: request, out: &out, timeout: 200 * time.Millisecond,
			pending: func(context.Context) (string, string) { return tc.why, tc.blocked }}
		err := f.wait(context.Background(), "patch")
		var code exitCode
		if !errors.As(err, &code) || int(code) != tc.code {
			t.Errorf("%s: %v, want exit %d", tc.name, err, tc.code)
		}
		if !strings.Contains(out.String(), tc.want) {
			t.Errorf("%s: output\n%s\nlacks %q", tc.name, out.String(), tc.want)
		}
	}
	j, err := store.Get("patch")
	if err != nil {
		t.Fatal(err)
	}
	code := 0
	j.State, j.ExitCode = jobs.Succeeded, &code
	if err := store.Save(j); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	f := follower{store: store, request: request, out: &out, pending: func(context.Context) (string, string) { return "", "" }}
	if err := f.wait(context.Background(), "patch"); err != nil {
		t.Errorf("a succeeded job: %v\n%s", err, out.String())
	}
}
