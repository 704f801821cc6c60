package ctl

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/history"
	"github.com/kustodian/kustodian/internal/picture"
	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/kustodian/kustodian/internal/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestAHistoryIsDrawnAsItHappened(t *testing.T) {
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	h := MaintenanceHistory{Items: []HistoryItem{
		{Node: "n2", Entry: history.Entry{Requested: at(0), Started: at(5), Drained: at(6), Ended: at(15), Result: history.Succeeded}},
		{Node: "n1", Entry: history.Entry{Requested: at(0), Started: at(1), Drained: at(2), Ended: at(4), Result: history.Failed, Message: "script exited 1"}},
		{Node: "n2", Entry: history.Entry{Requested: at(20), Ended: at(21), Result: history.Failed, Message: "withdrawn"}},
	}}
	c := historyChart(h, at(30))
	if len(c.Rows) != 2 || c.Rows[0].Label != "n1" || !c.Rows[0].Failed || !strings.Contains(c.Rows[0].Note, "script exited 1") {
		t.Fatalf("rows %+v", c.Rows)
	}
	n2 := c.Rows[1]
	want := []picture.Span{{Phase: picture.Waiting, From: at(0), To: at(5)}, {Phase: picture.Draining, From: at(5), To: at(6)}, {Phase: picture.Maintenance, From: at(6), To: at(15)}, {Phase: picture.Waiting, From: at(20), To: at(21)}}
	if len(n2.Actual) != len(want) {
		t.Fatalf("n2's spans %+v", n2.Actual)
	}
	for i := range want {
		if n2.Actual[i] != want[i] {
			t.Errorf("n2's span %d: %+v, want %+v", i, n2.Actual[i], want[i])
		}
	}
	if !n2.Failed || !strings.Contains(c.Summary[0], "3 maintenances on 2 nodes") || !strings.Contains(c.Summary[0], "2 failed") {
		t.Errorf("n2 failed %v, summary %q", n2.Failed, c.Summary)
	}
	var b bytes.Buffer
	if err := (&output{Format: outputSVG}).Draw(&b, c); err != nil || !strings.HasPrefix(b.String(), "<svg") {
		t.Errorf("-o svg: %v %.80s", err, b.String())
	}
}

func TestPlanDrawsPredictions(t *testing.T) {
	start, end := t0.Add(time.Minute), t0.Add(11*time.Minute)
	p := MaintenancePlan{Time: t0, Summary: "1 node done by ...", Items: []PlanItem{
		{Order: 1, Node: "n1", Policy: "default", Start: &start, End: &end},
		{Node: "n2", Policy: "default", NotPlaced: "held by an admin"},
		{Order: 2, Node: "n3", Policy: "default", Start: &start, End: &end, Overdue: true},
	}}
	c := planChart(p, nil)
	if len(c.Rows) != 3 || !c.Rows[2].Late || c.Rows[0].Late {
		t.Errorf("an overdue node not marked late: %+v", c.Rows)
	}
	c.Rows = c.Rows[:2]
	if len(c.Rows) != 2 || len(c.Rows[0].Predicted) != 2 || c.Rows[0].Predicted[1].Phase != picture.Maintenance || !strings.Contains(c.Rows[1].Note, "not placed: held by an admin") {
		t.Errorf("chart %+v", c.Rows)
	}
}

func TestOnlyCommandsThatDrawTakePictureFormats(t *testing.T) {
	out := &output{Format: outputHTML, shape: rows}
	if err := out.Check(); err == nil || !strings.Contains(err.Error(), "this command draws no timeline") {
		t.Errorf("-o html on a command without pictures: %v", err)
	}
	out.pictures = true
	if err := out.Check(); err != nil {
		t.Error(err)
	}
}

// A rollout's chart: the node that ran it as its history has it, marked
// when it failed; the node left, predicted; the soak after the stage.
func TestARolloutIsDrawnFromItsEntriesAndTheNodesHistories(t *testing.T) {
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	r := &rollout.MaintenanceRollout{ObjectMeta: metav1.ObjectMeta{Namespace: "kustodian", Name: "fix", UID: "uid-1", CreationTimestamp: metav1.NewTime(at(0))},
		Spec: rollout.Spec{Script: rollout.Source{Inline: "true\n", SHA256: rollout.SHA256([]byte("true\n"))},
			Promotion: rollout.Promotion{Mode: rollout.PromotionAuto, Soak: &metav1.Duration{Duration: 5 * time.Minute}}}}
	rev := rollout.Revision(r.Namespace, r.Name, r.Spec)
	started, finished := metav1.NewTime(at(1)), metav1.NewTime(at(10))
	r.Status.Nodes = []rollout.NodeStatus{{Name: "n1", Revision: rev, State: rollout.Succeeded, Started: &started, Finished: &finished}}
	in := status.Inputs{Namespace: "kustodian", Now: at(12)}
	for _, n := range []string{"n1", "n2"} {
		node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n, CreationTimestamp: metav1.NewTime(at(-60)),
			Labels: map[string]string{rollout.LabelRollouts: "enabled"}, Annotations: map[string]string{}}}
		if n == "n1" {
			node.Annotations[history.Annotation] = `[{"requested":"` + at(1).Format(time.RFC3339) + `","started":"` + at(2).Format(time.RFC3339) +
				`","drained":"` + at(3).Format(time.RFC3339) + `","ended":"` + at(10).Format(time.RFC3339) + `","result":"succeeded"}]`
		}
		in.Nodes = append(in.Nodes, node)
	}
	c, err := rolloutChart(r, in)
	if err != nil {
		t.Fatal(err)
	}
	byLabel := map[string]picture.Row{}
	for _, row := range c.Rows {
		byLabel[row.Label] = row
	}
	if n1 := byLabel["n1"]; len(n1.Actual) != 3 || n1.Actual[1].Phase != picture.Draining || !n1.Actual[2].To.Equal(at(10)) || n1.Failed {
		t.Errorf("n1: %+v", n1)
	}
	if n2 := byLabel["n2"]; len(n2.Actual) != 0 || len(n2.Predicted) != 1 || n2.Predicted[0].From.Before(at(12)) {
		t.Errorf("n2: %+v", n2)
	}
	if soak := byLabel["soak after stage 1"]; len(soak.Actual) != 1 || soak.Actual[0].Phase != picture.Soak || !soak.Actual[0].To.Equal(at(15)) {
		t.Errorf("soak: %+v (rows %d)", soak, len(c.Rows))
	}
}
