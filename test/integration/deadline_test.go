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

// A rollout with a deadline that one node at a time would miss: six nodes
// whose script takes 8 seconds, a policy that lets three go at once, a
// deadline 60 seconds away, maxConcurrency 3. The rollout says it is at
// risk, goes more than one node at a time (never more than three, what
// the scripts' own start and end times say, not the agents), and every
// node is done before the deadline.
func TestADeadlineRaisesTheRolloutsPace(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(6)
	nodecreds.Install(e, e.Namespace)
	if err := e.ApplyPolicy(`{metadata: {name: fleet}, spec: {concurrency: 3}}`); err != nil {
		t.Fatal(err)
	}
	key := nodecreds.NewRolloutKey(t)
	agents := rolloutAgents(t, e, nodes, key)
	script := writeScript(t, "date +%s.%N >> ../../starts\nsleep 8\ndate +%s.%N >> ../../ends\n")
	ctl := nodecreds.CtlFor(e)
	deadline := time.Now().Add(60 * time.Second).Truncate(time.Second)
	if out, err := ctl.Run(e.Ctx, "rollout", "create", "soon", "--script", script, "--stage", "all", "--reboot", "never", "-l", cluster.LabelTestEnv+"="+e.ID,
		"--deadline", deadline.UTC().Format(time.RFC3339), "--max-concurrency", "3", "--key", key.Private); err != nil {
		t.Fatalf("rollout create: %v\n%s", err, out)
	}
	dyn := dynamicClient(t, e)
	atRisk := ""
	e.Eventually("every node succeeded", 2*cluster.DefaultTimeout, func(ctx context.Context) error {
		r := getRollout(e, dyn, "soon")
		for _, c := range r.Status.Conditions {
			if c.Type == rollout.ConditionAtRisk && c.Status == metav1.ConditionTrue && atRisk == "" {
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
		t.Error("the rollout never said it was at risk (condition AtRisk)")
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
	if most < 2 || most > 3 {
		t.Errorf("at most %d scripts ran at once, want 2 or 3 (raised from one, never above maxConcurrency 3)", most)
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
