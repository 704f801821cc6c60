package integration

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/metrics"
	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// A rollout with a deadline that one node at a time would miss, in a
// policy with short windows: six nodes whose script takes 35 seconds, a
// policy that lets two go at once only in two windows of a minute (T0 to
// T0+1m and T0+2m to T0+3m), a deadline at T0+5m, well after the last
// window closed, maxConcurrency 3. Two rounds start in each window: one
// node at a time does two, then one, nodes in the first window, two in
// the second, and leaves one for the next day; two at once in the first
// window's second round make it, by about T0+3m10s. (A prediction that
// did not count the windows would see one at a time end in time all
// along, 4 x 35 s from T0+35s, and leave that node.) The rollout says it
// raised its pace, goes on in the second window where the first left it
// (each node runs once), never starts a script while both windows are
// closed, runs two at once (never more: the policy's concurrency, what the
// scripts' own start and end times say, not the agents), and every node
// is done before the deadline.
func TestADeadlineRaisesTheRolloutsPaceAcrossShortWindows(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(6)
	nodecreds.Install(e, e.Namespace)
	// T0: the first minute that begins at least 20 seconds from now (the
	// rollout is made and its nodes queue before it).
	t0 := time.Now().Add(20 * time.Second).Truncate(time.Minute).Add(time.Minute)
	hhmm := func(d time.Duration) string { return t0.Add(d).UTC().Format("15:04") }
	end := func(d time.Duration) string { // 24:00 for a window that ends at midnight
		if s := hhmm(d); s != "00:00" {
			return s
		}
		return "24:00"
	}
	windows := fmt.Sprintf(`[{start: %q, end: %q}, {start: %q, end: %q}]`, hhmm(0), end(time.Minute), hhmm(2*time.Minute), end(3*time.Minute))
	if err := e.ApplyPolicy(`{metadata: {name: fleet}, spec: {concurrency: 2, windows: ` + windows + `}}`); err != nil {
		t.Fatal(err)
	}
	key := nodecreds.NewRolloutKey(t)
	agents := rolloutAgents(t, e, nodes, key)
	script := writeScript(t, "date +%s.%N >> ../../starts\nsleep 35\ndate +%s.%N >> ../../ends\n")
	ctl := nodecreds.CtlFor(e)
	deadline := t0.Add(5 * time.Minute)
	if out, err := ctl.Run(e.Ctx, "rollout", "create", "soon", "--script", script, "--stage", "all", "--reboot", "never", "-l", cluster.LabelTestEnv+"="+e.ID,
		"--deadline", deadline.UTC().Format(time.RFC3339), "--max-concurrency", "3", "--key", key.Private); err != nil {
		t.Fatalf("rollout create: %v\n%s", err, out)
	}
	t.Logf("windows %s (UTC), deadline %s", windows, deadline.UTC().Format(time.RFC3339))
	dyn := dynamicClient(t, e)
	atRisk := ""
	e.Eventually("every node succeeded", time.Until(deadline)+cluster.DefaultTimeout, func(ctx context.Context) error {
		r := getRollout(e, dyn, "soon")
		for _, c := range r.Status.Conditions {
			if c.Type == rollout.ConditionAtRisk && c.Status == metav1.ConditionTrue && c.Reason == "PaceRaised" && atRisk == "" {
				atRisk = c.Reason + ": " + c.Message
			}
		}
		got := entries(r)
		done := 0
		for _, en := range got {
			if en.State == rollout.Succeeded {
				done++
			}
		}
		if done < len(nodes) {
			return fmt.Errorf("%d of %d succeeded", done, len(nodes))
		}
		return nil
	})
	ended := time.Now()
	if atRisk == "" {
		t.Error("the rollout never said it raised its pace (condition AtRisk, reason PaceRaised)")
	}
	// The scripts' own times: how many ran at once, at most.
	type mark struct {
		at    float64
		delta int
	}
	var marks []mark
	read := func(a *agentProc, what string, delta int) int {
		lines := a.ran(what)
		for _, l := range lines {
			f, err := strconv.ParseFloat(l, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", what, l, err)
			}
			marks = append(marks, mark{f, delta})
		}
		return len(lines)
	}
	for n, a := range agents {
		if s, en := read(a, "starts", 1), read(a, "ends", -1); s != 1 || en != 1 {
			t.Errorf("%s: the script started %d times and ended %d, want once", n, s, en)
		}
	}
	slices.SortFunc(marks, func(x, y mark) int {
		if x.at != y.at {
			return map[bool]int{true: -1, false: 1}[x.at < y.at]
		}
		return x.delta - y.delta // an end before a start at the same moment
	})
	most, now := 0, 0
	for _, m := range marks {
		now += m.delta
		most = max(most, now)
	}
	if most != 2 {
		t.Errorf("at most %d scripts ran at once, want 2 (raised from one, never above the policy's concurrency 2)", most)
	}
	// Windows decide when grants start; a script starts a few seconds
	// after its grant (the drain, the job's start): none starts in the gap
	// between the windows, and the second window goes on where the first
	// left off.
	const grace = 15 * time.Second
	second := 0
	for _, m := range marks {
		at := time.Unix(0, int64(m.at*1e9))
		switch {
		case m.delta < 0:
		case at.Before(t0) || at.After(t0.Add(time.Minute+grace)) && at.Before(t0.Add(2*time.Minute)) || at.After(t0.Add(3*time.Minute+grace)):
			t.Errorf("a script started at %s, outside both windows", at.UTC().Format(time.RFC3339Nano))
		case !at.Before(t0.Add(2 * time.Minute)):
			second++
		}
	}
	if second == 0 || second == len(nodes) {
		t.Errorf("%d of %d scripts started in the second window, want some but not all (the rollout spans both windows)", second, len(nodes))
	}
	if ended.After(deadline) {
		t.Errorf("the rollout ended at %s, after its deadline %s", ended.UTC().Format(time.RFC3339), deadline.UTC().Format(time.RFC3339))
	}
	// The agents' metrics say the deadline too.
	a := agents[nodes[0]]
	e.Eventually("the deadline in an agent's metrics", cluster.DefaultTimeout, func(context.Context) error {
		d, _, err := metrics.Read(a.spec.StateDir())
		if err != nil {
			return err
		}
		if got := d.Deadlines["soon"]; !got.Deadline.Equal(deadline) {
			return fmt.Errorf("deadlines %+v", d.Deadlines)
		}
		return nil
	})
	out, err := ctl.Run(e.Ctx, "rollout", "status", "soon")
	if err != nil || !strings.Contains(out, "deadline "+deadline.UTC().Format(time.RFC3339)) {
		t.Errorf("rollout status does not show the deadline: %v\n%s", err, out)
	}
	t.Logf("at risk: %s; at most %d at once; ended %s before the deadline\n%s", atRisk, most, deadline.Sub(ended).Round(time.Second), out)
}
