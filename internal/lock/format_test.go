package lock

import (
	"errors"
	"strings"
	"testing"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func inFormat(name, format string) *coordv1.Lease {
	l := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kustodian", Name: name}}
	if format != "" {
		l.Annotations = map[string]string{AnnotationFormat: format}
	}
	return l
}

// A Lease without a format is in the first (as the agents released
// before formats were marked write them); this build reads up to its own
// and refuses a newer one, or a value that is no format, naming the Lease
// and what to do.
func TestCheckFormat(t *testing.T) {
	for _, tc := range []struct {
		format string
		want   string // "" for none
	}{
		{"", ""},
		{"1", ""},
		{"2", "Lease kustodian/node-b is in format 2 of Kustodian's Leases; this agent reads formats up to 1: upgrade kustodian on this node"},
		{"0", `annotation kustodian.io/format is "0", not a format number`},
		{"v2", `annotation kustodian.io/format is "v2", not a format number`},
	} {
		err := CheckFormat(inFormat("node-b", tc.format))
		var fe *FormatError
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("format %q: %v", tc.format, err)
		case tc.want != "" && (!errors.As(err, &fe) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("format %q: %v, want a FormatError saying %q", tc.format, err, tc.want)
		}
	}
}

// What this build writes says its format: a record at every write, a
// queue summary with its summary. A newer agent's summary is neither read
// nor written over.
func TestWritesCarryTheFormat(t *testing.T) {
	rec := inFormat("node-a", "")
	Record{Node: "a", State: Waiting}.ApplyTo(rec)
	if got := rec.Annotations[AnnotationFormat]; got != "1" {
		t.Errorf("a record written says format %q, want 1", got)
	}
	q := inFormat(DefaultGroup.QueueName(), "")
	s := Summary{Nodes: []string{"a"}, Total: 1, ListRV: "10"}
	if ok, err := StoreSummary(q, DefaultGroup, s, "a", t0); !ok || err != nil {
		t.Fatalf("StoreSummary: %v %v", ok, err)
	}
	if got := q.Annotations[AnnotationFormat]; got != "1" {
		t.Errorf("a summary written says format %q, want 1", got)
	}
	if _, err := SummaryFromLease(q); err != nil {
		t.Errorf("reading the summary written: %v", err)
	}

	q.Annotations[AnnotationFormat] = "2"
	text := q.Annotations[AnnotationQueue]
	var fe *FormatError
	if _, err := SummaryFromLease(q); !errors.As(err, &fe) {
		t.Errorf("reading a summary in format 2: %v, want a FormatError", err)
	}
	s.ListRV = "20"
	if ok, err := StoreSummary(q, DefaultGroup, s, "a", t0); ok || !errors.As(err, &fe) {
		t.Errorf("writing over a summary in format 2: %v %v, want a FormatError", ok, err)
	}
	if q.Annotations[AnnotationQueue] != text || q.Annotations[AnnotationFormat] != "2" {
		t.Errorf("the summary in format 2 was changed: %v", q.Annotations)
	}
}
