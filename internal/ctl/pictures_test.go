package ctl

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/history"
	"github.com/kustodian/kustodian/internal/picture"
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
	}}
	c := planChart(p, nil)
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
