package picture

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 12, 6, 22, 0, 0, 0, time.UTC)

// chartOf is a chart of n nodes one after the other, each 10 minutes,
// the third failed, inside a window of the first two hours.
func chartOf(n int) Chart {
	c := Chart{Title: "plan <of> & night", Now: t0, Windows: []Window{{From: t0, To: t0.Add(2 * time.Hour), Label: "window Sat 22:00-00:00"}}}
	for i := range n {
		start := t0.Add(time.Duration(i) * 10 * time.Minute)
		r := Row{Label: fmt.Sprintf("node-%d", i),
			Predicted: []Span{{Phase: Maintenance, From: start, To: start.Add(10 * time.Minute)}},
			Actual:    []Span{{Phase: Waiting, From: t0, To: start}, {Phase: Draining, From: start, To: start.Add(time.Minute)}, {Phase: Maintenance, From: start.Add(time.Minute), To: start.Add(12 * time.Minute)}}}
		if i == 2 {
			r.Failed, r.Note = true, "script exited 1"
		}
		if i == 3 {
			r.Late, r.Quarantined = true, true
		}
		c.Rows = append(c.Rows, r)
	}
	return c
}

// wellFormed parses a document as XML to its end.
func wellFormed(t *testing.T, doc string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(doc))
	d.Strict = true
	d.Entity = xml.HTMLEntity
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("not well-formed: %v\n%s", err, doc[:min(len(doc), 2000)])
		}
	}
}

func TestTheSVGHasARowPerNodeAndMarksWhatMatters(t *testing.T) {
	var b bytes.Buffer
	if err := SVG(&b, chartOf(5)); err != nil {
		t.Fatal(err)
	}
	doc := b.String()
	wellFormed(t, doc)
	for what, re := range map[string]struct {
		re   string
		want int
	}{
		"node rows":         {`<g class="row[^"]*" data-node=`, 5},
		"failed rows":       {`<g class="row failed"`, 1},
		"failed marks":      {`&#x2717; failed`, 1},
		"late, quarantined": {`<g class="row late quarantined".*>late, quarantined</text>`, 1},
		"windows":           {`<rect class="window"`, 1},
		"predicted bars":    {`class="predicted `, 5},
		"actual bars":       {`class="actual `, 15},
		"the title escape":  {`plan &lt;of&gt; &amp; night`, 1},
	} {
		if got := len(regexp.MustCompile(re.re).FindAllString(doc, -1)); got != re.want {
			t.Errorf("%s: %d, want %d", what, got, re.want)
		}
	}
}

func TestThePageIsSelfContained(t *testing.T) {
	var b bytes.Buffer
	if err := HTML(&b, chartOf(3)); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, ref := range []string{"<script", " src=", "href=", "@import", "url(", "http://", "https://"} {
		if strings.Contains(page, ref) {
			t.Errorf("the page refers elsewhere (%q)", ref)
		}
	}
	if !strings.HasPrefix(page, "<!DOCTYPE html>") || strings.Count(page, "<tr") != 4 || !strings.Contains(page, `<tr class="failed">`) {
		t.Errorf("page:\n%s", page)
	}
	// The SVG inside is well-formed on its own.
	start, end := strings.Index(page, "<svg"), strings.Index(page, "</svg>")
	wellFormed(t, page[start:end+len("</svg>")])
}

func TestPageSizes(t *testing.T) {
	for _, n := range []int{20, 500} {
		var b bytes.Buffer
		if err := HTML(&b, chartOf(n)); err != nil {
			t.Fatal(err)
		}
		t.Logf("the page of %d nodes: %d bytes", n, b.Len())
		if b.Len() > n*2000+10000 {
			t.Errorf("the page of %d nodes is %d bytes: over 2 kB a node", n, b.Len())
		}
	}
}

func TestTicksAreRound(t *testing.T) {
	for d, want := range map[time.Duration]time.Duration{
		45 * time.Second: 5 * time.Second, 20 * time.Minute: 5 * time.Minute, 5 * time.Hour: 30 * time.Minute, 3 * 24 * time.Hour: 6 * time.Hour,
	} {
		if got := tickStep(d); got != want {
			t.Errorf("tickStep(%s) = %s, want %s", d, got, want)
		}
	}
}

func TestWindowsOfASchedule(t *testing.T) {
	// Open from 22:00 to 00:00 each day.
	at := func(x time.Time) (bool, time.Time) {
		day := x.Truncate(24 * time.Hour)
		opens, closes := day.Add(22*time.Hour), day.Add(24*time.Hour)
		if !x.Before(opens) {
			return true, closes
		}
		return false, opens
	}
	got := WindowsOf(at, t0.Add(-time.Hour), t0.Add(27*time.Hour), "w")
	if len(got) != 2 || !got[0].From.Equal(t0) || !got[0].To.Equal(t0.Add(2*time.Hour)) || !got[1].From.Equal(t0.Add(24*time.Hour)) || !got[1].To.Equal(t0.Add(26*time.Hour)) {
		t.Errorf("windows %+v", got)
	}
}
