package ctl

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/kustodian/kustodian/internal/status"
	"github.com/kustodian/kustodian/internal/status/statustest"
)

// outputOf is -o format as the flags would make it.
func outputOf(format string) *output {
	return &output{Format: format, wide: true, AllowMissing: true}
}

// Each output mode of queue has the shape kubectl users expect: the
// queue's documents for json and yaml, one node/NAME a line for name, the
// values a jsonpath picks, and custom-columns with and
// without headers.
func TestQueueOutputModes(t *testing.T) {
	s := status.Build(statustest.Fixture())
	run := func(o *output) string {
		t.Helper()
		if err := o.Check(); err != nil {
			t.Fatalf("-o %s: %v", o.Format, err)
		}
		var b bytes.Buffer
		if err := queuePrinter(o)(&b, s); err != nil {
			t.Fatalf("-o %s: %v", o.Format, err)
		}
		return b.String()
	}
	// Grant order of the fixture: n3, n2, then n4 whose agent is silent.
	var q struct {
		Kind  string `json:"kind"`
		Items []struct {
			Node     string `json:"node"`
			Position int    `json:"position"`
		} `json:"items"`
	}
	for _, format := range []string{outputJSON, outputYAML} {
		out := run(outputOf(format))
		var err error
		if format == outputJSON {
			err = json.Unmarshal([]byte(out), &q)
		} else {
			err = yaml.Unmarshal([]byte(out), &q)
		}
		if err != nil || q.Kind != "MaintenanceQueue" || len(q.Items) != 3 || q.Items[0].Node != "n3" || q.Items[0].Position != 1 {
			t.Errorf("-o %s: %+v %v\n%s", format, q, err, out)
		}
	}
	for format, want := range map[string]string{
		outputName:                  "node/n3\nnode/n2\nnode/n4\n",
		"jsonpath={.items[*].node}": "n3 n2 n4",
		"custom-columns=NODE:.node,POSITION:.position": "NODE   POSITION\nn3     1\nn2     2\nn4     0\n",
		"jsonpath-as-json={.items[0].position}":        "[\n    1\n]\n",
	} {
		if got := run(outputOf(format)); got != want {
			t.Errorf("-o %s:\n%q\nwant\n%q", format, got, want)
		}
	}
	headless := outputOf("custom-columns=NODE:.node")
	headless.NoHeaders = true
	if got := run(headless); got != "n3\nn2\nn4\n" {
		t.Errorf("-o custom-columns --no-headers: %q", got)
	}
	table := outputOf("")
	table.NoHeaders = true
	if got := run(table); strings.Contains(got, "POSITION") || strings.Count(got, "\n") != 3 {
		t.Errorf("the table with --no-headers:\n%s", got)
	}
	sorted := outputOf("custom-columns=NODE:.node")
	sorted.SortBy = "{.node}"
	if got := run(sorted); got != "NODE\nn2\nn3\nn4\n" {
		t.Errorf("--sort-by {.node}: %q", got)
	}
	byPosition := outputOf(outputName)
	byPosition.SortBy = ".position" // n4's 0 first, then 1, 2
	if got := run(byPosition); got != "node/n4\nnode/n3\nnode/n2\n" {
		t.Errorf("--sort-by .position: %q", got)
	}
	byMissing := outputOf("")
	byMissing.SortBy = ".nosuchfield"
	if got := run(byMissing); !strings.Contains(got, "n3") {
		t.Errorf("--sort-by a field no row has:\n%s", got)
	}
	if got := run(outputOf(outputWide)); !strings.Contains(strings.Split(got, "\n")[0], "MESSAGE") || !strings.Contains(got, "position 1 of 2") {
		t.Errorf("-o wide has no MESSAGE column:\n%s", got)
	}
}

// status -o name and jsonpath select the rows status shows; a format that
// does not exist, or a template that does not parse, is refused in one
// line.
func TestStatusOutputModesAndRefusals(t *testing.T) {
	s := status.Build(statustest.Fixture())
	var b bytes.Buffer
	if err := statusPrinter(outputOf(outputName), []string{"n2", "n1"}, false)(&b, s); err != nil || b.String() != "node/n2\nnode/n1\n" {
		t.Errorf("-o name: %q %v", b.String(), err)
	}
	b.Reset()
	if err := statusPrinter(outputOf("jsonpath={.nodes[*].state}"), []string{"n1", "n2"}, false)(&b, s); err != nil || b.String() != "InMaintenance Waiting" {
		t.Errorf("-o jsonpath: %q %v", b.String(), err)
	}
	for format, want := range map[string]string{
		"xml":                       `unknown output format "xml"`,
		"jsonpath={.items[":         "-o jsonpath={.items[: ",
		"custom-columns=":           "give the columns",
		"go-template={{.nodes}}":    "-o go-template: kustodian-ctl has no Go templates; use -o jsonpath=",
		"jsonpath":                  "-o jsonpath: give the JSONPath",
		"custom-columns-file=/none": "-o custom-columns-file: open /none",
		"sort-by {.items[":          "--sort-by {.items[: ",
	} {
		o := outputOf(format)
		if path, ok := strings.CutPrefix(format, "sort-by "); ok {
			o = outputOf("")
			o.SortBy = path
		}
		err := o.Check()
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("-o %s: %v, want one line containing %q", format, err, want)
		}
	}
	policy := outputOf(outputWide)
	policy.wide = false
	if err := policy.Check(); err == nil {
		t.Error("-o wide accepted by a command without a wide table")
	}
}
