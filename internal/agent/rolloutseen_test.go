package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kustodian/kustodian/internal/rollout"
)

// canarySucceeded is a rollout on two nodes, one node then all, with
// automatic promotion after a 10-minute soak, whose canary succeeded and
// wrote that it finished long ago; and the node that waits for stage 1.
func canarySucceeded(t *testing.T, uid string) (cachedRollout, []rollout.NodeFacts, string) {
	t.Helper()
	one := 1
	r := &rollout.MaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "kustodian", Name: "fix", UID: types.UID("uid-" + uid)},
		Spec: rollout.Spec{Script: rollout.Source{Inline: "true\n", SHA256: rollout.SHA256([]byte("true\n"))},
			Stages:    []rollout.Stage{{Nodes: &one}, {All: true}},
			Promotion: rollout.Promotion{Mode: rollout.PromotionAuto, Soak: &metav1.Duration{Duration: 10 * time.Minute}}}}
	var nodes []rollout.NodeFacts
	for _, n := range []string{"n1", "n2"} {
		nodes = append(nodes, rollout.NodeFacts{Name: n, Labels: map[string]string{rollout.LabelRollouts: "enabled"}})
	}
	canary, other := "n1", "n2"
	if v, err := rollout.Decide(r, "n2", nodes, rollout.Room{}, time.Time{}, nil, nil); err != nil {
		t.Fatal(err)
	} else if v.Take {
		canary, other = "n2", "n1"
	}
	long := metav1.NewTime(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC))
	r.Status.Nodes = []rollout.NodeStatus{{Name: canary, Revision: rollout.Revision(r.Namespace, r.Name, r.Spec), State: rollout.Succeeded, Finished: &long}}
	return cachedRollout{r: r}, nodes, other
}

// The agent times a stage's soak from when it first saw the stage succeed,
// keeps that on the host for the next run, and forgets the rollouts that
// are gone.
func TestStagesSeenAreKeptAcrossRuns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, rolloutStagesFile)
	t1 := time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC)
	c, nodes, waiting := canarySucceeded(t, "1")

	first := &stagesSeen{path: path}
	rs := []cachedRollout{c}
	if err := first.observe(rs, nodes, waiting, t1); err != nil {
		t.Fatal(err)
	}
	if got := rs[0].seen[0]; !got.Equal(t1) {
		t.Fatalf("stage 0 seen at %v, want %v (when this agent saw it, not the entry's finish)", got, t1)
	}
	v, _ := rollout.Decide(c.r, waiting, nodes, rollout.Room{}, t1.Add(5*time.Minute), rs[0].seen, rs[0].before)
	if v.Take || !v.WakeAt.Equal(t1.Add(10*time.Minute)) {
		t.Fatalf("5 minutes into the soak: take %v, wake at %v; want no, and %v", v.Take, v.WakeAt, t1.Add(10*time.Minute))
	}

	// The agent exits and starts again: what it saw stands.
	again := &stagesSeen{path: path}
	rs = []cachedRollout{c}
	if err := again.observe(rs, nodes, waiting, t1.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := rs[0].seen[0]; !got.Equal(t1) {
		t.Fatalf("after a restart stage 0 is seen at %v, want %v", got, t1)
	}

	// A new rollout of the same name (another UID) is seen anew, and the
	// one that is gone is forgotten.
	other, _, _ := canarySucceeded(t, "2")
	rs = []cachedRollout{other}
	if err := again.observe(rs, nodes, waiting, t1.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := rs[0].seen[0]; !got.Equal(t1.Add(2 * time.Hour)) {
		t.Fatalf("a new rollout's stage 0 is seen at %v, want now", got)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "uid-1") || !strings.Contains(string(b), "uid-2") {
		t.Fatalf("the file keeps a rollout that is gone, or not the new one:\n%s", b)
	}

	// A file that cannot be read is set aside: the stages are seen anew.
	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	rs = []cachedRollout{other}
	err = (&stagesSeen{path: path}).observe(rs, nodes, waiting, t1.Add(3*time.Hour))
	if err == nil || !strings.Contains(err.Error(), "corrupt") {
		t.Fatalf("a corrupt file: %v", err)
	}
	if got := rs[0].seen[0]; !got.Equal(t1.Add(3 * time.Hour)) {
		t.Fatalf("after a corrupt file stage 0 is seen at %v, want now", got)
	}
	if _, err := os.Stat(path + ".corrupt"); err != nil {
		t.Fatalf("the corrupt file was not set aside: %v", err)
	}
}

// before is what observe gives rollout c as the nodes that had taken it
// when node self could first take it.
func beforeOf(t *testing.T, s *stagesSeen, c cachedRollout, nodes []rollout.NodeFacts, self string, now time.Time) []string {
	t.Helper()
	rs := []cachedRollout{c}
	if err := s.observe(rs, nodes, self, now); err != nil {
		t.Fatal(err)
	}
	return rs[0].before
}

// The nodes that had taken a revision when this node could first take it
// are this agent's observation: none when its host ran rollouts before
// the rollout came (an entry there at its first look was written out of
// turn), those it found when it came later (it defers to them), kept
// across restarts and never changed by later entries.
func TestBeforeIsWhatThisAgentFoundFirst(t *testing.T) {
	t1 := time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC)
	c, nodes, self := canarySucceeded(t, "1")
	c.r.CreationTimestamp = metav1.NewTime(t1)
	other := "n1"
	if self == "n1" {
		other = "n2"
	}

	// Rollouts ran here before the rollout came: the canary's entry at the
	// first look stands in for no one.
	early := &stagesSeen{path: filepath.Join(t.TempDir(), rolloutStagesFile)}
	early.rolloutsRun(false, t1.Add(-time.Hour))
	if got := beforeOf(t, early, c, nodes, self, t1.Add(time.Minute)); got == nil || len(got) != 0 {
		t.Fatalf("an agent there from the start found %v before it, want none", got)
	}

	// Rollouts began here after it came: what it found then came before.
	path := filepath.Join(t.TempDir(), rolloutStagesFile)
	late := &stagesSeen{path: path}
	late.rolloutsRun(false, t1.Add(time.Hour))
	if got := beforeOf(t, late, c, nodes, self, t1.Add(time.Hour)); !slices.Equal(got, []string{other}) {
		t.Fatalf("a late agent found %v before it, want [%s]", got, other)
	}
	// Kept across a restart, and unchanged by entries written since.
	c.r.Status.Nodes = append(c.r.Status.Nodes, rollout.NodeStatus{Name: "n3", Revision: c.r.Status.Nodes[0].Revision, State: rollout.Running})
	nodes = append(nodes, rollout.NodeFacts{Name: "n3", Labels: map[string]string{rollout.LabelRollouts: "enabled"}})
	if got := beforeOf(t, &stagesSeen{path: path}, c, nodes, self, t1.Add(2*time.Hour)); !slices.Equal(got, []string{other}) {
		t.Fatalf("after a restart and another entry, %v before it, want [%s]", got, other)
	}

	// The Node said already that its host runs rollouts, and no time was
	// kept (an agent before this version, a state directory lost): the
	// node could take them all along.
	labelled := &stagesSeen{path: filepath.Join(t.TempDir(), rolloutStagesFile)}
	labelled.rolloutsRun(true, t1.Add(time.Hour))
	if got := beforeOf(t, labelled, c, nodes, self, t1.Add(time.Hour)); got == nil || len(got) != 0 {
		t.Fatalf("an agent whose Node was labelled already found %v before it, want none", got)
	}

	// A new script (another revision) of a rollout this agent saw while
	// its node could take it came after this node could: on time.
	c.r.Spec.Script = rollout.Source{Inline: "echo 2\n", SHA256: rollout.SHA256([]byte("echo 2\n"))}
	rev2 := rollout.Revision(c.r.Namespace, c.r.Name, c.r.Spec)
	c.r.Status.Nodes = []rollout.NodeStatus{{Name: other, Revision: rev2, State: rollout.Succeeded}}
	if got := beforeOf(t, late, c, nodes, self, t1.Add(3*time.Hour)); got == nil || len(got) != 0 {
		t.Fatalf("on a new revision of a rollout it saw, a late agent found %v before it, want none", got)
	}

	// Just labelled: for rolloutSettle, a node that claims may not have
	// seen the label yet, and counts as before; after it, none does.
	fresh := &stagesSeen{path: filepath.Join(t.TempDir(), rolloutStagesFile)}
	fresh.rolloutsRun(false, t1.Add(-10*time.Second))
	c3, nodes3, self3 := canarySucceeded(t, "3")
	c3.r.CreationTimestamp = metav1.NewTime(t1)
	took := c3.r.Status.Nodes
	c3.r.Status.Nodes = nil
	if got := beforeOf(t, fresh, c3, nodes3, self3, t1); len(got) != 0 {
		t.Fatalf("before anyone took it: %v", got)
	}
	c3.r.Status.Nodes = took
	if got := beforeOf(t, fresh, c3, nodes3, self3, t1.Add(time.Second)); len(got) != 1 {
		t.Fatalf("a claim while settling: %v before it, want the claimer", got)
	}
	fresh2 := &stagesSeen{path: filepath.Join(t.TempDir(), rolloutStagesFile)}
	fresh2.rolloutsRun(false, t1.Add(-10*time.Second))
	c3.r.Status.Nodes = nil
	beforeOf(t, fresh2, c3, nodes3, self3, t1)
	c3.r.Status.Nodes = took
	if got := beforeOf(t, fresh2, c3, nodes3, self3, t1.Add(-10*time.Second).Add(rolloutSettle)); len(got) != 0 {
		t.Fatalf("a claim after settling: %v before it, want none", got)
	}

	// Not selected at first, selected later: what it found when selected.
	c2, nodes2, self2 := canarySucceeded(t, "2")
	c2.r.CreationTimestamp = metav1.NewTime(t1)
	c2.r.Spec.NodeSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "a"}}
	for i := range nodes2 {
		if nodes2[i].Name != self2 {
			nodes2[i].Labels["pool"] = "a"
		}
	}
	sel := &stagesSeen{path: filepath.Join(t.TempDir(), rolloutStagesFile)}
	sel.rolloutsRun(false, t1.Add(-time.Hour))
	if got := beforeOf(t, sel, c2, nodes2, self2, t1.Add(time.Minute)); got != nil {
		t.Fatalf("a node the rollout does not select found %v before it, want nothing recorded", got)
	}
	for i := range nodes2 {
		nodes2[i].Labels["pool"] = "a"
	}
	if got := beforeOf(t, sel, c2, nodes2, self2, t1.Add(time.Hour)); len(got) != 1 {
		t.Fatalf("selected later, it found %v before it, want the canary", got)
	}
}

// A file kept by an earlier agent (a list of revisions) is read, not set
// aside.
func TestStagesSeenReadsTheEarlierFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), rolloutStagesFile)
	c, nodes, self := canarySucceeded(t, "1")
	rev := rollout.Revision(c.r.Namespace, c.r.Name, c.r.Spec)
	old := `[{"rollout":"fix","uid":"uid-1","revision":"` + rev + `","stages":{"0":"2026-11-26T02:00:00Z"}}]`
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	rs := []cachedRollout{c}
	if err := (&stagesSeen{path: path}).observe(rs, nodes, self, time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	if got := rs[0].seen[0]; !got.Equal(time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC)) {
		t.Fatalf("stage 0 seen at %v, want the time the earlier file kept", got)
	}
}
