package ctl

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/rollout"
)

// A stopped rollout on some nodes lists those nodes, never one it does
// not select. (Seen: once a rollout on role=web had stopped, its status
// listed a node of another role as pending, "the rollout stopped".)
func TestRolloutStatusListsOnlyTheNodesItSelects(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 2, 0, 0, 0, time.UTC)
	r := &rollout.MaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "kustodian", Name: "fix", UID: "uid-1", CreationTimestamp: metav1.NewTime(t0)},
		Spec: rollout.Spec{Script: rollout.Source{Inline: "true\n", SHA256: rollout.SHA256([]byte("true\n"))},
			NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "web"}}}}
	var nodes []rollout.NodeFacts
	for _, n := range []struct{ name, role string }{{"web-1", "web"}, {"web-2", "web"}, {"db-1", "db"}} {
		nodes = append(nodes, rollout.NodeFacts{Name: n.name, Created: t0.Add(-time.Hour),
			Labels: map[string]string{"role": n.role, rollout.LabelRollouts: "enabled"}})
	}
	finished := metav1.NewTime(t0)
	r.Status.Nodes = []rollout.NodeStatus{{Name: "web-1", Revision: rollout.Revision(r.Namespace, r.Name, r.Spec), State: rollout.RolledBack, Finished: &finished}}
	v, err := rolloutRows(r, nodes, rollout.Room{}, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, row := range v.rows {
		listed = append(listed, row.Node+" "+row.State)
	}
	if len(v.rows) != 2 || v.rows[0].Node != "web-1" || v.rows[1].Node != "web-2" {
		t.Fatalf("rows %v, want web-1 (RolledBack) and web-2 (pending) only", listed)
	}
}

// A node that deferred to a later stage says why it waits now: here, the
// rollout stopped.
func TestRolloutStatusSaysWhyADeferredNodeWaits(t *testing.T) {
	t0 := time.Date(2026, 11, 27, 2, 0, 0, 0, time.UTC)
	r := &rollout.MaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "kustodian", Name: "bad", UID: "uid-2", CreationTimestamp: metav1.NewTime(t0)},
		Spec: rollout.Spec{Script: rollout.Source{Inline: "false\n", SHA256: rollout.SHA256([]byte("false\n"))}, Promoted: 1}}
	nodes := enabledNodes(t0, "n1", "n2")
	rev := rollout.Revision(r.Namespace, r.Name, r.Spec)
	finished := metav1.NewTime(t0)
	r.Status.Nodes = []rollout.NodeStatus{
		{Name: "n1", Revision: rev, State: rollout.RolledBack, Finished: &finished},
		{Name: "n2", Revision: rev, Stage: 1, State: rollout.Deferred, Message: "the places of stage 0 were taken before this node could ask; it waits for stage 1"},
	}
	v, err := rolloutRows(r, nodes, rollout.Room{}, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(v.rows) != 2 || v.rows[1].State != rollout.Deferred || !strings.Contains(v.rows[1].Message, "the rollout stopped: node n1 is RolledBack") {
		t.Fatalf("rows %+v, want n2 Deferred saying the rollout stopped", v.rows)
	}
}

// Stages are counted from 1 wherever a person reads or types them: the
// last of two stages is "stage 2 of 2", its nodes' rows say 2, and
// promote --to 2 opens it. (Seen: status said "stage 1 of 2" for the last
// of two, and --to took 0 for the first.)
func TestStagesAreCountedFromOne(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC)
	r := &rollout.MaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "kustodian", Name: "fix", UID: "uid-3", CreationTimestamp: metav1.NewTime(t0)},
		Spec: rollout.Spec{Script: rollout.Source{Inline: "true\n", SHA256: rollout.SHA256([]byte("true\n"))}, Promoted: 1}}
	nodes := enabledNodes(t0, "n1", "n2", "n3")
	rev := rollout.Revision(r.Namespace, r.Name, r.Spec)
	finished := metav1.NewTime(t0)
	r.Status.Nodes = []rollout.NodeStatus{
		{Name: "n1", Revision: rev, Stage: 0, State: rollout.Succeeded, Finished: &finished},
		{Name: "n2", Revision: rev, Stage: 1, State: rollout.Running},
	}
	v, err := rolloutRows(r, nodes, rollout.Room{}, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	printRollout(&b, v, t0.Add(time.Minute), true)
	out := b.String()
	for _, want := range []string{"stage 2 of 2 (all)", "stages: 1 (1 node): ", "; 2 (all): ", "stage 2 reaches this node"} {
		if !strings.Contains(out, want) {
			t.Errorf("rollout status does not say %q:\n%s", want, out)
		}
	}
	for _, row := range []struct{ node, stage string }{{"n1", "1"}, {"n2", "2"}} {
		if !regexp.MustCompile(`(?m)^` + row.node + `\s+` + row.stage + `\s`).MatchString(out) {
			t.Errorf("the row of %s does not give stage %s:\n%s", row.node, row.stage, out)
		}
	}

	for _, c := range []struct {
		open, to int
		set      bool
		want     int // -1: refused
	}{
		{open: 0, want: 1},
		{open: 1, want: -1}, // at the last of two: no next
		{to: 1, set: true, want: 0},
		{to: 2, set: true, want: 1},
		{to: 0, set: true, want: -1},
		{to: 3, set: true, want: -1},
	} {
		got, err := promoteTo("fix", 2, c.open, c.open, c.to, c.set)
		switch {
		case c.want < 0 && err == nil:
			t.Errorf("promote (open %d, --to %d set %v) opens index %d, want a refusal", c.open, c.to, c.set, got)
		case c.want >= 0 && (err != nil || got != c.want):
			t.Errorf("promote (open %d, --to %d set %v) = %d, %v; want index %d", c.open, c.to, c.set, got, err, c.want)
		}
	}
	if _, err := promoteTo("fix", 2, 0, 0, 3, true); err == nil || !strings.Contains(err.Error(), "stages 1 to 2") {
		t.Errorf("--to 3 of 2: %v, want it to name stages 1 to 2", err)
	}
}

// What a node writes in its entry reaches the admin's terminal written out
// visibly, never as escape sequences: a compromised node may write what it
// likes in its own entry.
func TestRolloutStatusShowsNodesWordsVisibly(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC)
	r := &rollout.MaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "kustodian", Name: "fix", UID: "uid-4", CreationTimestamp: metav1.NewTime(t0)},
		Spec: rollout.Spec{Script: rollout.Source{Inline: "true\n", SHA256: rollout.SHA256([]byte("true\n"))}}}
	nodes := enabledNodes(t0, "n1")
	finished := metav1.NewTime(t0)
	r.Status.Nodes = []rollout.NodeStatus{{Name: "n1", Revision: rollout.Revision(r.Namespace, r.Name, r.Spec), State: rollout.Failed, Finished: &finished,
		Message: "exit 1\x1b]0;owned\x07", LastLines: []string{"\x1b[2Jcleared"}}}
	v, err := rolloutRows(r, nodes, rollout.Room{}, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	printRollout(&b, v, t0.Add(time.Minute), true)
	if out := b.String(); strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, `\x1b]0;owned\x07`) {
		t.Errorf("rollout status passes a node's escape sequences to the terminal:\n%q", out)
	}
}

// A rollout stopped by a failure says at which stage as people count them.
func TestStoppedAtStageCountedFromOne(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 2, 0, 0, 0, time.UTC)
	r := &rollout.MaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "kustodian", Name: "fix", UID: "uid-5", CreationTimestamp: metav1.NewTime(t0)},
		Spec: rollout.Spec{Script: rollout.Source{Inline: "true\n", SHA256: rollout.SHA256([]byte("true\n"))}, Promoted: 1}}
	nodes := enabledNodes(t0, "n1", "n2", "n3")
	rev := rollout.Revision(r.Namespace, r.Name, r.Spec)
	finished := metav1.NewTime(t0)
	r.Status.Nodes = []rollout.NodeStatus{
		{Name: "n1", Revision: rev, Stage: 0, State: rollout.Succeeded, Finished: &finished},
		{Name: "n2", Revision: rev, Stage: 1, State: rollout.Failed, Finished: &finished, Message: "exit 1"},
	}
	v, err := rolloutRows(r, nodes, rollout.Room{}, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, c := range v.summary.Conditions {
		msgs = append(msgs, c.Type+": "+c.Message)
	}
	if !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, "stopped at stage 2 by node n2") }) {
		t.Errorf("the conditions do not say it stopped at stage 2 (the second):\n%s", strings.Join(msgs, "\n"))
	}
}

// enabledNodes are nodes created an hour before t0 whose hosts run
// rollouts.
func enabledNodes(t0 time.Time, names ...string) []rollout.NodeFacts {
	var nodes []rollout.NodeFacts
	for _, n := range names {
		nodes = append(nodes, rollout.NodeFacts{Name: n, Created: t0.Add(-time.Hour), Labels: map[string]string{rollout.LabelRollouts: "enabled"}})
	}
	return nodes
}
