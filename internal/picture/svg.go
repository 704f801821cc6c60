package picture

import (
	"fmt"
	"html"
	"io"
	"strings"
	"time"
)

// The layout, in pixels.
const (
	labelWidth = 220
	plotWidth  = 900
	rowHeight  = 24
	barHeight  = 8
	axisHeight = 28
	legendRows = 1
	margin     = 8
)

// Colours of the phases (distinct also for the colour-blind: a light and a
// dark of blue and orange, then purple), of a window, a failure and the
// lines.
var colour = map[Phase]string{
	Waiting:     "#a6cee3",
	Draining:    "#ff7f00",
	Maintenance: "#1f78b4",
	Rebooting:   "#6a3d9a",
	Soak:        "#fdbf6f",
}

const (
	windowColour   = "#e5f5e0"
	failedColour   = "#e31a1c"
	deadlineColour = "#e31a1c"
	nowColour      = "#333333"
)

// SVG writes the chart as one SVG document.
func SVG(w io.Writer, c Chart) error {
	_, err := io.WriteString(w, svg(c, true))
	return err
}

// esc makes text safe in XML.
func esc(s string) string { return html.EscapeString(s) }

// svg is the chart's SVG: standalone with its XML namespace (a file), or
// to be put in an HTML page.
func svg(c Chart, standalone bool) string {
	from, to := c.Range()
	span := to.Sub(from)
	x := func(t time.Time) float64 {
		if t.Before(from) {
			t = from
		}
		if t.After(to) {
			t = to
		}
		return labelWidth + float64(t.Sub(from))/float64(span)*plotWidth
	}
	height := axisHeight + len(c.Rows)*rowHeight + (legendRows+1)*rowHeight + margin
	width := labelWidth + plotWidth + margin
	var b strings.Builder
	ns := ""
	if standalone {
		ns = ` xmlns="http://www.w3.org/2000/svg"`
	}
	fmt.Fprintf(&b, `<svg%s class="timeline" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", ns, width, height, width, height)
	fmt.Fprintf(&b, "<title>%s</title>\n", esc(c.Title))
	top, bottom := float64(axisHeight), float64(axisHeight+len(c.Rows)*rowHeight)
	// The windows, shaded under everything.
	for _, win := range c.Windows {
		if !win.To.After(from) || !win.From.Before(to) {
			continue
		}
		fmt.Fprintf(&b, `<rect class="window" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s</title></rect>`+"\n",
			x(win.From), top, x(win.To)-x(win.From), bottom-top, windowColour, esc(win.Label))
	}
	// The time axis: a tick at each step, labelled in UTC.
	step := tickStep(span)
	for t := from.Truncate(step); !t.After(to); t = t.Add(step) {
		if t.Before(from) {
			continue
		}
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#dddddd"/>`+"\n", x(t), top-4, x(t), bottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555555">%s</text>`+"\n", x(t), axisHeight-10, tickLabel(t, step))
	}
	// One row per node: its label, its predicted bar above its actual one.
	for i, r := range c.Rows {
		y := float64(axisHeight + i*rowHeight)
		marks := r.marks()
		cls := strings.Join(append([]string{"row"}, marks...), " ")
		fmt.Fprintf(&b, `<g class="%s" data-node="%s">`, cls, esc(r.Label))
		if r.Note != "" {
			fmt.Fprintf(&b, "<title>%s: %s</title>", esc(r.Label), esc(r.Note))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%.1f">%s</text>`, margin, y+rowHeight/2+4, esc(clip(r.Label, 32)))
		bars := func(spans []Span, dy float64, kind string, opacity string) {
			for _, s := range spans {
				w := x(s.To) - x(s.From)
				if w < 1 {
					w = 1
				}
				fmt.Fprintf(&b, `<rect class="%s %s" x="%.1f" y="%.1f" width="%.1f" height="%d" fill="%s"%s><title>%s %s: %s to %s</title></rect>`,
					kind, s.Phase, x(s.From), y+dy, w, barHeight, colour[s.Phase], opacity, esc(r.Label), s.Phase, s.From.UTC().Format(time.RFC3339), s.To.UTC().Format(time.RFC3339))
			}
		}
		bars(r.Predicted, 3, "predicted", ` fill-opacity="0.45" stroke="#777777" stroke-dasharray="2,2"`)
		bars(r.Actual, 3+barHeight+2, "actual", "")
		if len(marks) > 0 {
			end := from
			for _, s := range append(append([]Span(nil), r.Actual...), r.Predicted...) {
				if s.To.After(end) {
					end = s.To
				}
			}
			fmt.Fprintf(&b, `<text class="mark" x="%.1f" y="%.1f" fill="%s" font-weight="bold">%s</text>`, x(end)+3, y+rowHeight/2+6, failedColour, strings.Replace(strings.Join(marks, ", "), "failed", "&#x2717; failed", 1))
		}
		b.WriteString("</g>\n")
	}
	// The deadline and now, over the rows.
	if c.Deadline != nil {
		fmt.Fprintf(&b, `<line class="deadline" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"><title>deadline %s</title></line>`+"\n",
			x(*c.Deadline), top, x(*c.Deadline), bottom, deadlineColour, c.Deadline.UTC().Format(time.RFC3339))
	}
	if !c.Now.IsZero() && !c.Now.Before(from) && !c.Now.After(to) {
		fmt.Fprintf(&b, `<line class="now" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="4,3"><title>now %s</title></line>`+"\n",
			x(c.Now), top, x(c.Now), bottom, nowColour, c.Now.UTC().Format(time.RFC3339))
	}
	// The legend.
	ly := bottom + rowHeight
	lx := float64(labelWidth)
	for _, p := range Phases {
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="12" height="12" fill="%s"/><text x="%.1f" y="%.1f">%s</text>`+"\n", lx, ly-10, colour[p], lx+16, ly, p)
		lx += 110
	}
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="12" height="12" fill="%s" stroke="#999999"/><text x="%.1f" y="%.1f">window</text>`+"\n", lx, ly-10, windowColour, lx+16, ly)
	lx += 90
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" fill="#555555">upper bar: predicted; lower: actual</text>`+"\n", lx, ly)
	b.WriteString("</svg>\n")
	return b.String()
}

// tickStep is a round step that gives about 6 to 12 ticks over d.
func tickStep(d time.Duration) time.Duration {
	for _, s := range []time.Duration{time.Second, 5 * time.Second, 10 * time.Second, 30 * time.Second,
		time.Minute, 5 * time.Minute, 10 * time.Minute, 30 * time.Minute,
		time.Hour, 3 * time.Hour, 6 * time.Hour, 12 * time.Hour, 24 * time.Hour, 7 * 24 * time.Hour} {
		if d/s <= 12 {
			return s
		}
	}
	return 30 * 24 * time.Hour
}

// tickLabel is a tick's time: with seconds under a minute's step, the
// date from a day's.
func tickLabel(t time.Time, step time.Duration) string {
	u := t.UTC()
	switch {
	case step < time.Minute:
		return u.Format("15:04:05")
	case step < 24*time.Hour:
		return u.Format("15:04")
	}
	return u.Format("01-02")
}

// clip shortens a label to n runes.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
