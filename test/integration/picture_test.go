package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// browser is headless Chromium (Debian's chromium, which make deps
// installs): a missing one fails the test, it is never skipped.
type browser struct {
	t      *testing.T
	binary string
}

func newBrowser(t *testing.T) browser {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return browser{t: t, binary: p}
		}
	}
	t.Fatal("no chromium on PATH: make deps installs Debian's chromium package")
	return browser{}
}

// run runs the browser headless on url with args, in a profile of its
// own, and returns its output and the console messages it logged.
func (b browser) run(url string, args ...string) (stdout string, console []string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.t.Context(), 90*time.Second)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
		"--user-data-dir=" + b.t.TempDir(), "--enable-logging=stderr", "--v=0"}, args...)
	cmd := exec.CommandContext(ctx, b.binary, append(all, url)...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		b.t.Fatalf("chromium %s: %v\n%s", url, err, errOut.String())
	}
	for _, line := range strings.Split(errOut.String(), "\n") {
		if strings.Contains(line, ":CONSOLE") || strings.Contains(line, "Uncaught") {
			console = append(console, line)
		}
	}
	return out.String(), console
}

// dom is the page at url as the browser rendered it; a console message
// fails the test.
func (b browser) dom(url string) string {
	b.t.Helper()
	dom, console := b.run(url, "--dump-dom")
	if len(console) > 0 {
		b.t.Errorf("console messages loading %s:\n%s", url, strings.Join(console, "\n"))
	}
	return dom
}

// screenshot saves the page at url as a PNG at path.
func (b browser) screenshot(url, path string) {
	b.t.Helper()
	b.run(url, "--screenshot="+path, "--window-size=1280,1000", "--hide-scrollbars")
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		b.t.Fatalf("no screenshot at %s: %v", path, err)
	}
}

// count is how many times re matches in s.
func count(s, re string) int { return len(regexp.MustCompile(re).FindAllString(s, -1)) }

// screenshotDir is where the browser tests leave their screenshots.
func screenshotDir(t *testing.T) string {
	dir := filepath.Join(cluster.CacheRoot(), "screenshots")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The pictures of a real rollout, loaded in a real browser: the rollout's
// report, the plan and the history each render without a console message,
// with a row per node, the failed node marked and the policy's window
// shaded.
func TestPicturesOfARealRolloutInABrowser(t *testing.T) {
	b := newBrowser(t)
	e := cluster.New(t)
	nodes := e.Nodes(3)
	nodecreds.Install(e, e.Namespace)
	// A window open now (two hours either side), for every node.
	now := time.Now().UTC()
	if err := e.ApplyPolicy(fmt.Sprintf(`{metadata: {name: night}, spec: {windows: [{start: "%s", end: "%s"}]}}`,
		now.Add(-2*time.Hour).Format("15:04"), now.Add(2*time.Hour).Format("15:04"))); err != nil {
		t.Fatal(err)
	}
	key := nodecreds.NewRolloutKey(t)
	rolloutAgents(t, e, nodes, key)
	ctl := nodecreds.CtlFor(e)
	// The canary fails: the rollout stops there, the others stay pending.
	fails := writeScript(t, "echo 'disk full' >&2; exit 1\n")
	if out, err := ctl.Run(e.Ctx, "rollout", "create", "broken", "--script", fails, "--key", key.Private); err != nil {
		t.Fatalf("rollout create: %v\n%s", err, out)
	}
	dyn := dynamicClient(t, e)
	var failed string
	waitEntries(e, dyn, "broken", "the canary to fail", func(got map[string]rollout.NodeStatus) error {
		for n, s := range got {
			if s.State == rollout.Failed || s.State == rollout.RolledBack {
				failed = n
				return nil
			}
		}
		return fmt.Errorf("entries %v", got)
	})
	dir := t.TempDir()
	pages := map[string][]string{
		"report":  {"rollout", "report", "broken", "-o", "html"},
		"status":  {"rollout", "status", "broken", "-o", "html"},
		"history": {"history", "-o", "html"},
		"plan":    {"plan", "--policy", "night", "-o", "html"},
	}
	for name, args := range pages {
		out, err := ctl.Command(e.Ctx, args...).Output()
		if err != nil {
			t.Fatalf("kustodian-ctl %s: %v", strings.Join(args, " "), err)
		}
		path := filepath.Join(dir, name+".html")
		if err := os.WriteFile(path, out, 0o600); err != nil {
			t.Fatal(err)
		}
		dom := b.dom("file://" + path)
		rows := count(dom, `<g class="row[^"]*" data-node="`+e.ID)
		want := map[string]int{"report": 3, "status": 3, "history": 1, "plan": 3}[name]
		if rows != want {
			t.Errorf("%s: %d node rows rendered, want %d", name, rows, want)
		}
		if name != "plan" && !strings.Contains(dom, `<g class="row failed" data-node="`+failed+`"`) {
			t.Errorf("%s: the failed node %s is not marked", name, failed)
		}
		if name != "history" && count(dom, `<rect class="window"`) == 0 {
			t.Errorf("%s: no window shaded", name)
		}
		if strings.Contains(string(out), "<script") {
			t.Errorf("%s: the file has a script", name)
		}
		t.Logf("%s: %d bytes, %d node rows", name, len(out), rows)
	}
	shot := filepath.Join(screenshotDir(t), "rollout-report.png")
	b.screenshot("file://"+filepath.Join(dir, "report.html"), shot)
	t.Logf("screenshot of the report: %s", shot)
}

// The dashboard, in a real browser, shows a node's bar change as its
// maintenance runs: waiting for the lock behind another node, then in
// maintenance, then back with its history.
func TestTheDashboardFollowsAMaintenanceInABrowser(t *testing.T) {
	b := newBrowser(t)
	e := cluster.New(t)
	nodes := e.Nodes(2)
	agents := startRequesting(t, e, nodes[:1])
	agents[0].waitInProgress(cluster.DefaultTimeout)
	url := dashboardOf(t, nodecreds.CtlFor(e))
	bar := func(node, phase string) string {
		return `<g class="row[^"]*" data-node="` + node + `".*?class="actual ` + phase + `"`
	}
	held := nodes[0]
	dom := b.dom(url)
	if count(dom, bar(held, "maintenance")) != 1 {
		t.Errorf("the dashboard does not show %s in maintenance:\n%s", held, dom)
	}
	// The second node waits behind it.
	second := newAgent(t, e, nodes[1])
	second.request("kernel")
	second.start()
	e.Eventually("the dashboard to show "+nodes[1]+" waiting", cluster.DefaultTimeout, func(context.Context) error {
		if dom := b.dom(url); count(dom, bar(nodes[1], "waiting")) != 1 {
			return fmt.Errorf("no waiting bar of %s", nodes[1])
		}
		return nil
	})
	agents[0].finish()
	second.waitInProgress(cluster.DefaultTimeout)
	e.Eventually("the dashboard to show "+held+"'s maintenance ended and "+nodes[1]+" in maintenance", cluster.DefaultTimeout, func(context.Context) error {
		dom := b.dom(url)
		// Ended: its history's drain, no bar of now.
		if count(dom, bar(held, "draining")) != 1 || count(dom, bar(nodes[1], "maintenance")) != 1 {
			return errors.New("not yet")
		}
		return nil
	})
	shot := filepath.Join(screenshotDir(t), "dashboard.png")
	b.screenshot(url, shot)
	t.Logf("screenshot of the dashboard: %s", shot)
	second.finish()
}
