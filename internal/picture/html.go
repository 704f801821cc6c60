package picture

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// style is the page's only style, inline.
const style = `body{font-family:sans-serif;margin:1.5em;color:#222}
h1{font-size:1.3em}
p.summary{margin:.2em 0}
table{border-collapse:collapse;margin-top:1em;font-size:.9em}
th,td{border:1px solid #ccc;padding:.2em .5em;text-align:left;vertical-align:top}
tr.failed td{background:#fde0e0}
svg.timeline{max-width:100%;height:auto}
footer{margin-top:1em;color:#777;font-size:.8em}`

// HTML writes the chart as one self-contained page: the summary, the
// timeline (inline SVG) and a table of the nodes under it.
func HTML(w io.Writer, c Chart) error {
	_, err := io.WriteString(w, Page(c, ""))
	return err
}

// Page is the chart's page, its Body in an element of id "live"; script,
// when not empty, is an inline script put at its end (a live page's, which
// replaces that element's content).
func Page(c Chart, script string) string {
	return PageOf(c.Title, Body(c), script)
}

// Section is a chart as a section of a page of several (its Body under its
// title), or, with why, the title and why there is no chart.
func Section(id string, c Chart, why string) string {
	if why != "" {
		return fmt.Sprintf("<section data-cluster=\"%s\">\n<h1>%s</h1>\n<p class=\"summary\">%s</p>\n</section>\n", esc(id), esc(c.Title), esc(why))
	}
	return fmt.Sprintf("<section data-cluster=\"%s\">\n%s</section>\n", esc(id), Body(c))
}

// PageOf is a page of title whose live part is body (HTML this package
// made: Body, Sections).
func PageOf(title, body, script string) string {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n")
	fmt.Fprintf(&b, "<title>%s</title>\n<style>%s</style>\n</head>\n<body>\n<main id=\"live\">\n", esc(title), style)
	b.WriteString(body)
	b.WriteString("</main>\n")
	if script != "" {
		b.WriteString(script)
	}
	b.WriteString("</body>\n</html>\n")
	return b.String()
}

// Body is the page's content: the title, the summary, the timeline and
// the table.
func Body(c Chart) string {
	var b strings.Builder
	fmt.Fprintf(&b, "<h1>%s</h1>\n", esc(c.Title))
	for _, s := range c.Summary {
		fmt.Fprintf(&b, "<p class=\"summary\">%s</p>\n", esc(s))
	}
	b.WriteString(svg(c, false))
	b.WriteString("<table class=\"nodes\">\n<tr><th>node</th><th>predicted</th><th>actual</th><th>note</th></tr>\n")
	for _, r := range c.Rows {
		cls := ""
		if r.Failed {
			cls = ` class="failed"`
		}
		fmt.Fprintf(&b, "<tr%s><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n", cls, esc(r.Label), esc(spans(r.Predicted)), esc(spans(r.Actual)+failed(r)), esc(r.Note))
	}
	b.WriteString("</table>\n")
	if !c.Now.IsZero() {
		fmt.Fprintf(&b, "<footer>made by kustodian-ctl at %s</footer>\n", c.Now.UTC().Format(time.RFC3339))
	}
	return b.String()
}

func failed(r Row) string {
	marks := r.marks()
	if len(marks) == 0 {
		return ""
	}
	return " (" + strings.Join(marks, ", ") + ")"
}

// spans says a row's spans in a few words: "waiting 10:02-10:05,
// maintenance 10:05-10:15".
func spans(ss []Span) string {
	var parts []string
	for _, s := range ss {
		parts = append(parts, fmt.Sprintf("%s %s-%s", s.Phase, s.From.UTC().Format("15:04:05"), s.To.UTC().Format("15:04:05")))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, ", ")
}
