package agent

import (
	"os"
	"path/filepath"
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
	if v, err := rollout.Decide(r, "n2", nodes, time.Time{}, nil); err != nil {
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
	if err := first.observe(rs, nodes, t1); err != nil {
		t.Fatal(err)
	}
	if got := rs[0].seen[0]; !got.Equal(t1) {
		t.Fatalf("stage 0 seen at %v, want %v (when this agent saw it, not the entry's finish)", got, t1)
	}
	v, _ := rollout.Decide(c.r, waiting, nodes, t1.Add(5*time.Minute), rs[0].seen)
	if v.Take || !v.WakeAt.Equal(t1.Add(10*time.Minute)) {
		t.Fatalf("5 minutes into the soak: take %v, wake at %v; want no, and %v", v.Take, v.WakeAt, t1.Add(10*time.Minute))
	}

	// The agent exits and starts again: what it saw stands.
	again := &stagesSeen{path: path}
	rs = []cachedRollout{c}
	if err := again.observe(rs, nodes, t1.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := rs[0].seen[0]; !got.Equal(t1) {
		t.Fatalf("after a restart stage 0 is seen at %v, want %v", got, t1)
	}

	// A new rollout of the same name (another UID) is seen anew, and the
	// one that is gone is forgotten.
	other, _, _ := canarySucceeded(t, "2")
	rs = []cachedRollout{other}
	if err := again.observe(rs, nodes, t1.Add(2*time.Hour)); err != nil {
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
	err = (&stagesSeen{path: path}).observe(rs, nodes, t1.Add(3*time.Hour))
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
