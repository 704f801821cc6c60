package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// realAlertmanager is Debian's prometheus-alertmanager, run by the test on
// 127.0.0.1 with basic auth: the Alertmanager the agents speak to.
type realAlertmanager struct {
	t          *testing.T
	url        string
	user, pass string
}

// startAlertmanager runs Alertmanager until the test ends. make
// test-integration unpacks it into the cache and puts it on PATH; without
// it the test fails, it does not skip.
func startAlertmanager(t *testing.T) *realAlertmanager {
	t.Helper()
	bin, err := exec.LookPath("prometheus-alertmanager")
	if err != nil {
		t.Fatalf("prometheus-alertmanager is not on PATH (make test-integration unpacks it from Debian's package into ~/.cache/kustodian/tools/prometheus/usr/bin): %v", err)
	}
	dir := t.TempDir()
	am := &realAlertmanager{t: t, user: "kustodian", pass: "s3cret-" + fmt.Sprint(time.Now().UnixNano())}
	hash, err := bcrypt.GenerateFromPassword([]byte(am.pass), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	// Alerts named Inhibited are inhibited while an Inhibitor fires.
	config := `route: {receiver: "null", group_wait: 1s}
receivers: [{name: "null"}]
inhibit_rules:
- source_matchers: [alertname="Inhibitor"]
  target_matchers: [alertname="Inhibited"]
`
	web := fmt.Sprintf("basic_auth_users:\n  %s: %s\n", am.user, hash)
	for name, text := range map[string]string{"alertmanager.yml": config, "web.yml": web} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	am.url = "http://" + addr
	var out bytes.Buffer
	// Debian's build reads its templates from /usr/share/prometheus, where
	// nothing is installed: in a mount namespace of its own, a tmpfs over
	// /usr/share holds the unpacked package's directory instead.
	share := filepath.Join(filepath.Dir(bin), "..", "share", "prometheus")
	script := `mount -t tmpfs kustodian-test /usr/share && mkdir /usr/share/prometheus && mount --bind "$0" /usr/share/prometheus && exec "$@"`
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script, share,
		bin, "--config.file="+filepath.Join(dir, "alertmanager.yml"), "--web.config.file="+filepath.Join(dir, "web.yml"),
		"--storage.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr, "--cluster.listen-address=")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // by its PID: the process this test started
		<-exited
		if t.Failed() {
			t.Logf("Alertmanager's log:\n%s", out.String())
		}
	})
	err = cluster.Eventually(context.Background(), 30*time.Second, func(ctx context.Context) error {
		select {
		case <-exited:
			return fmt.Errorf("exited: %s", out.String())
		default:
		}
		return am.do(ctx, http.MethodGet, "/-/ready", nil, nil)
	})
	if err != nil {
		t.Fatalf("Alertmanager on %s not ready: %v\n%s", addr, err, out.String())
	}
	return am
}

func (am *realAlertmanager) do(ctx context.Context, method, path string, body, into any) error {
	var r bytes.Buffer
	if body != nil {
		if err := json.NewEncoder(&r).Encode(body); err != nil {
			return err
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, am.url+path, &r)
	if err != nil {
		return err
	}
	req.SetBasicAuth(am.user, am.pass)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if into != nil {
		return json.NewDecoder(resp.Body).Decode(into)
	}
	return nil
}

// fire sends an alert that fires for an hour.
func (am *realAlertmanager) fire(labels map[string]string) {
	am.t.Helper()
	now := time.Now().UTC()
	alert := []map[string]any{{"labels": labels, "startsAt": now, "endsAt": now.Add(time.Hour)}}
	if err := am.do(context.Background(), http.MethodPost, "/api/v2/alerts", alert, nil); err != nil {
		am.t.Fatal(err)
	}
}

type amSilence struct {
	ID       string `json:"id"`
	Matchers []struct {
		Name, Value      string
		IsRegex, IsEqual bool
	} `json:"matchers"`
	CreatedBy string    `json:"createdBy"`
	Comment   string    `json:"comment"`
	EndsAt    time.Time `json:"endsAt"`
	Status    struct {
		State string `json:"state"`
	} `json:"status"`
}

// silencesBy lists the silences created by createdBy, expired ones too.
func (am *realAlertmanager) silencesBy(ctx context.Context, createdBy string) ([]amSilence, error) {
	var all, out []amSilence
	if err := am.do(ctx, http.MethodGet, "/api/v2/silences", nil, &all); err != nil {
		return nil, err
	}
	for _, s := range all {
		if s.CreatedBy == createdBy {
			out = append(out, s)
		}
	}
	return out, nil
}

// alertState is Alertmanager's state of the alert named name: active,
// suppressed (silenced or inhibited) or unprocessed; "" when it has none.
func (am *realAlertmanager) alertState(ctx context.Context, name string) (string, error) {
	var alerts []struct {
		Labels map[string]string `json:"labels"`
		Status struct {
			State string `json:"state"`
		} `json:"status"`
	}
	if err := am.do(ctx, http.MethodGet, "/api/v2/alerts?filter=alertname%3D%22"+name+"%22", nil, &alerts); err != nil {
		return "", err
	}
	if len(alerts) == 0 {
		return "", nil
	}
	return alerts[0].Status.State, nil
}

// endpoint is the Alertmanager as a host lists it (alertmanager.endpoints):
// its URL and the file of its credentials, written for the test.
func (am *realAlertmanager) endpoint(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "alertmanager-credentials")
	if err := os.WriteFile(file, []byte(am.user+":"+am.pass+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return am.url + " basic " + file
}

// A policy's silence: created in a real Alertmanager when the node is
// cordoned, over its alerts only (they are suppressed, another node's
// fire), named in the record and an Event, expired when the node is back;
// a failed maintenance expires it too. The credentials come from the
// host's configuration, and the agent's log never shows them.
func TestAlertmanagerSilenceThroughMaintenance(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(2)
	nodecreds.Install(e, e.Namespace)
	am := startAlertmanager(t)
	if err := e.ApplyPolicy(fmt.Sprintf(`
metadata: {name: silenced}
spec:
  alertmanager:
    url: %q
    silence:
      matchers: ['node="{{ .Node }}"', 'instance=~"{{ regexQuote .Node }}(:.*)?"']
      link: "https://runbooks.example.com/{{ .Policy }}"
`, am.url)); err != nil {
		t.Fatal(err)
	}
	me, other := nodes[0], nodes[1]
	am.fire(map[string]string{"alertname": "NodeDown", "node": me, "instance": me + ":9100"})
	am.fire(map[string]string{"alertname": "OtherNodeDown", "node": other, "instance": other + ":9100"})
	createdBy := "kustodian:" + me

	a := newAgent(t, e, me, "--alertmanager-endpoints", am.endpoint(t))
	a.request("kernel 6.12")
	a.start()
	a.waitInProgress(cluster.DefaultTimeout)
	var id string
	e.Eventually("an active silence of "+me+" over its alerts", cluster.DefaultTimeout, func(ctx context.Context) error {
		ss, err := am.silencesBy(ctx, createdBy)
		if err != nil {
			return err
		}
		if len(ss) != 1 || ss[0].Status.State != "active" {
			return fmt.Errorf("silences by %s: %+v", createdBy, ss)
		}
		s := ss[0]
		if len(s.Matchers) != 2 || s.Matchers[0].Name != "node" || s.Matchers[0].Value != me || !s.Matchers[1].IsRegex ||
			!strings.Contains(s.Comment, me) || !strings.Contains(s.Comment, "kernel 6.12") || !strings.Contains(s.Comment, "https://runbooks.example.com/silenced") {
			return fmt.Errorf("silence %+v", s)
		}
		if d := time.Until(s.EndsAt); d < 20*time.Minute || d > 31*time.Minute {
			return fmt.Errorf("silence ends in %s, want the default 30m", d)
		}
		id = s.ID
		mine, err := am.alertState(ctx, "NodeDown")
		if err != nil {
			return err
		}
		theirs, err := am.alertState(ctx, "OtherNodeDown")
		if err != nil {
			return err
		}
		if mine != "suppressed" || theirs != "active" {
			return fmt.Errorf("alert states: %s's %q, %s's %q", me, mine, other, theirs)
		}
		return nil
	})
	waitRecord(e, me, "to name its silence", func(r *lock.Record) error {
		if !strings.HasPrefix(r.Silence, id+" until ") {
			return fmt.Errorf("silence %q, want %s until ...", r.Silence, id)
		}
		return nil
	})
	eventSays(e, me, "AlertsSilenced", id)

	a.completes()
	ss, err := am.silencesBy(e.Ctx, createdBy)
	if err != nil {
		t.Fatal(err)
	}
	if len(ss) != 1 || ss[0].Status.State != "expired" {
		t.Fatalf("after the maintenance, silences by %s: %+v; want the one expired", createdBy, ss)
	}
	if st, err := am.alertState(e.Ctx, "NodeDown"); err != nil || st != "active" {
		t.Errorf("after the maintenance %s's alert is %q (%v), want active", me, st, err)
	}
	eventSays(e, me, "SilenceExpired", id)

	// A failed maintenance brings the alerts back.
	if out, err := runJob(t, a, "--id", "bad", "--", "sh", "-c", "exit 3").CombinedOutput(); err != nil {
		t.Fatalf("kustodian run: %v\n%s", err, out)
	}
	a.start()
	waitRecord(e, me, "Failed by its job", inState(lock.Failed))
	e.Eventually("the failed maintenance's silence expired", cluster.DefaultTimeout, func(ctx context.Context) error {
		ss, err := am.silencesBy(ctx, createdBy)
		if err != nil {
			return err
		}
		expired := 0
		for _, s := range ss {
			if s.Status.State == "expired" {
				expired++
			}
		}
		if len(ss) != 2 || expired != 2 {
			return fmt.Errorf("silences by %s: %+v, want two, both expired", createdBy, ss)
		}
		return nil
	})
	a.completes()

	// While the maintenance lasts, the silence is extended before its
	// bound (here 8 s): the same silence, ending later.
	if err := e.ApplyPolicy(fmt.Sprintf(`
metadata: {name: silenced}
spec:
  alertmanager:
    url: %q
    silence: {matchers: ['node="{{ .Node }}"'], duration: 8s}
`, am.url)); err != nil {
		t.Fatal(err)
	}
	a.request("long work")
	a.start()
	a.waitInProgress(cluster.DefaultTimeout)
	var first amSilence
	e.Eventually("the third silence", cluster.DefaultTimeout, func(ctx context.Context) error {
		ss, err := am.silencesBy(ctx, createdBy)
		if err != nil {
			return err
		}
		for _, s := range ss {
			if s.Status.State == "active" {
				first = s
				return nil
			}
		}
		return fmt.Errorf("no active silence by %s: %+v", createdBy, ss)
	})
	e.Eventually("the silence extended past its first end", 30*time.Second, func(ctx context.Context) error {
		ss, err := am.silencesBy(ctx, createdBy)
		if err != nil {
			return err
		}
		for _, s := range ss {
			if s.ID == first.ID && s.Status.State == "active" && s.EndsAt.After(first.EndsAt.Add(time.Second)) {
				return nil
			}
		}
		return fmt.Errorf("silence %s still ends at %s", first.ID, first.EndsAt)
	})
	if strings.Contains(a.logText(), am.pass) {
		t.Error("the agent's log shows Alertmanager's password")
	}
	a.completes()
}

// An Alertmanager that cannot be reached holds no maintenance back: the
// node is drained and in maintenance, its record and a SilenceFailed Event
// say the silence failed; the alertmanager gate of the same policy blocks
// the next node meanwhile.
func TestAlertmanagerUnreachable(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(1)
	nodecreds.Install(e, e.Namespace)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + l.Addr().String()
	l.Close()
	if err := e.ApplyPolicy(fmt.Sprintf(`
metadata: {name: silenced}
spec:
  alertmanager:
    url: %q
    silence: {matchers: ['node="{{ .Node }}"']}
`, gone)); err != nil {
		t.Fatal(err)
	}
	a := newAgent(t, e, nodes[0], "--alertmanager-endpoints", gone)
	a.request("patch")
	a.start()
	a.waitInProgress(cluster.DefaultTimeout)
	waitRecord(e, nodes[0], "to say its silence failed", func(r *lock.Record) error {
		if r.State != lock.InMaintenance || !strings.HasPrefix(r.Silence, "failed: ") || !strings.Contains(r.Silence, "unreachable") {
			return fmt.Errorf("%s, silence %q", r.State, r.Silence)
		}
		return nil
	})
	eventSays(e, nodes[0], "SilenceFailed", "the maintenance goes on")
	a.completes()
}

// The alertmanager gate: an active alert blocks the waiting node; an
// inhibited one and an alert outside its matchers do not; an operator's
// silence of the alert opens it.
func TestAlertmanagerGate(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(1)
	nodecreds.Install(e, e.Namespace)
	am := startAlertmanager(t)
	if err := e.ApplyPolicy(fmt.Sprintf(`
metadata: {name: gated}
spec:
  alertmanager:
    url: %q
  blockers:
    alertmanager: {matchers: ['severity="critical"'], alertFilterRegexp: "^Watchdog$"}
`, am.url)); err != nil {
		t.Fatal(err)
	}
	am.fire(map[string]string{"alertname": "DiskFull", "severity": "critical"})
	am.fire(map[string]string{"alertname": "Watchdog", "severity": "critical"})  // filtered out by name
	am.fire(map[string]string{"alertname": "CPUHigh", "severity": "warning"})    // outside the matchers
	am.fire(map[string]string{"alertname": "Inhibitor", "severity": "none"})     // inhibits Inhibited
	am.fire(map[string]string{"alertname": "Inhibited", "severity": "critical"}) // inhibited: ignored
	e.Eventually("Inhibited to be inhibited", cluster.DefaultTimeout, func(ctx context.Context) error {
		st, err := am.alertState(ctx, "Inhibited")
		if err != nil || st != "suppressed" {
			return fmt.Errorf("Inhibited is %q (%v)", st, err)
		}
		return nil
	})
	a := newAgent(t, e, nodes[0], "--alertmanager-endpoints", am.endpoint(t))
	a.request("patch")
	a.start()
	waitRecord(e, nodes[0], "to be held by DiskFull alone", inStateSaying(lock.Waiting,
		"alert DiskFull active in Alertmanager (neither silenced nor inhibited)"))
	if h := groupLockHolder(e, lock.GroupRef{Policy: "gated"}); h != "" {
		t.Fatalf("%s holds the lock while DiskFull fires", h)
	}
	// The operator silences DiskFull: the gate opens.
	now := time.Now().UTC()
	silence := map[string]any{"matchers": []map[string]any{{"name": "alertname", "value": "DiskFull", "isRegex": false, "isEqual": true}},
		"startsAt": now, "endsAt": now.Add(time.Hour), "createdBy": "operator", "comment": "known, harmless"}
	if err := am.do(e.Ctx, http.MethodPost, "/api/v2/silences", silence, nil); err != nil {
		t.Fatal(err)
	}
	a.waitInProgress(cluster.DefaultTimeout)
	a.completes()
}
