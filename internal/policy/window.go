package policy

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	// Hosts may lack the time zone database; windows must not depend on it.
	_ "time/tzdata"
)

// Weekdays are the names windows use, Monday first.
var Weekdays = []string{"Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}

func weekday(name string) (time.Weekday, bool) {
	i := slices.Index(Weekdays, name)
	if i < 0 {
		return 0, false
	}
	return time.Weekday((i + 1) % 7), true
}

// clock parses HH:MM (24:00 allowed as an end) into minutes of the day.
func clock(s string, end bool) (int, error) {
	h, m, ok := strings.Cut(s, ":")
	if !ok || len(h) != 2 || len(m) != 2 {
		return 0, fmt.Errorf("%q is not HH:MM", s)
	}
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if err1 != nil || err2 != nil || hh < 0 || mm < 0 || mm > 59 || hh > 24 || (hh == 24 && (mm != 0 || !end)) {
		return 0, fmt.Errorf("%q is not a time of day (00:00 to 23:59%s)", s, map[bool]string{true: ", or 24:00", false: ""}[end])
	}
	return hh*60 + mm, nil
}

// window is a Window parsed.
type window struct {
	days       map[time.Weekday]bool // empty: every day
	start, end int                   // minutes of the day
	loc        *time.Location
	zone       string
}

func parseWindow(w Window) (window, error) {
	p := window{days: map[time.Weekday]bool{}, zone: w.TimeZone}
	for _, d := range w.Days {
		wd, ok := weekday(d)
		if !ok {
			return p, fmt.Errorf("days: %q is not one of %s", d, strings.Join(Weekdays, ", "))
		}
		p.days[wd] = true
	}
	var err error
	if p.start, err = clock(w.Start, false); err != nil {
		return p, fmt.Errorf("start: %w", err)
	}
	if p.end, err = clock(w.End, true); err != nil {
		return p, fmt.Errorf("end: %w", err)
	}
	if p.start == p.end {
		return p, fmt.Errorf("start and end are both %s: the window would be empty (use 00:00 to 24:00 for a whole day)", w.Start)
	}
	if p.zone == "" {
		p.zone = "UTC"
	}
	if p.loc, err = time.LoadLocation(p.zone); err != nil || p.zone == "Local" {
		return p, fmt.Errorf("timeZone: %q is not an IANA time zone name (such as Europe/Berlin or UTC)", w.TimeZone)
	}
	return p, nil
}

// at is the instant of a minute of the day on the local date y-m-d (which
// may be out of range: the 32nd of a month is the 1st of the next). In a DST
// gap the wall time does not exist and time.Date moves it by the gap; a
// gap at midnight (Atlantic/Azores, America/Santiago) makes time.Date give
// the evening before, so that case is moved forward to the first instant of
// the day.
func (w window) at(y int, m time.Month, d, minute int) time.Time {
	noon := time.Date(y, m, d, 12, 0, 0, 0, w.loc)
	y, m, d = noon.Date()
	t := time.Date(y, m, d, 0, minute, 0, 0, w.loc)
	if ty, tm, td := t.In(w.loc).Date(); ty != y || tm != m || td != d {
		_, before := t.Zone()
		_, after := noon.Zone()
		t = t.Add(time.Duration(after-before) * time.Second)
	}
	return t
}

// instance is one opening of a window: [from, to).
type instance struct{ from, to time.Time }

// instances lists the openings that start on the local days from the day
// before t to days after it, in order.
func (w window) instances(t time.Time, days int) []instance {
	local := t.In(w.loc)
	var out []instance
	for i := -1; i <= days; i++ {
		y, m, d := local.Date()
		day := time.Date(y, m, d+i, 12, 0, 0, 0, w.loc) // noon: clear of DST edges
		if len(w.days) > 0 && !w.days[day.Weekday()] {
			continue
		}
		y, m, d = day.Date()
		from := w.at(y, m, d, w.start)
		var to time.Time
		if w.end > w.start {
			to = w.at(y, m, d, w.end)
		} else {
			to = w.at(y, m, d+1, w.end) // across midnight
		}
		out = append(out, instance{from, to})
	}
	return out
}

// Schedule is the parsed windows and excluded dates of a policy.
type Schedule struct {
	windows  []window
	excluded map[string]bool
}

// ParseSchedule checks and parses the windows and excluded dates.
func ParseSchedule(windows []Window, excludeDates []string) (Schedule, error) {
	s := Schedule{excluded: map[string]bool{}}
	for i, w := range windows {
		p, err := parseWindow(w)
		if err != nil {
			return s, fmt.Errorf("windows[%d].%w", i, err)
		}
		s.windows = append(s.windows, p)
	}
	for i, d := range excludeDates {
		if _, err := time.Parse(time.DateOnly, d); err != nil {
			return s, fmt.Errorf("excludeDates[%d]: %q is not a date YYYY-MM-DD", i, d)
		}
		s.excluded[d] = true
	}
	return s, nil
}

// WindowVerdict says whether grants may start at a moment.
type WindowVerdict struct {
	Open bool
	// Change is when the verdict changes next: the close of the current
	// opening, or the next opening. Zero when it never changes (no
	// windows), or when no opening comes within a year.
	Change time.Time
	// Reason, when closed: "outside window: next opens Sat 02:00
	// Europe/Berlin"; Next, the part after "outside window: ".
	Reason string
	Next   string
}

// closed is the verdict of a closed schedule: next says when it opens.
func closed(change time.Time, next string) WindowVerdict {
	return WindowVerdict{Change: change, Reason: "outside window: " + next, Next: next}
}

// horizon is how far ahead the next opening is looked for.
const horizon = 400

// At evaluates the schedule at t.
func (s Schedule) At(t time.Time) WindowVerdict {
	if len(s.windows) == 0 {
		return WindowVerdict{Open: true}
	}
	// Open now: until when?
	var closes time.Time
	for _, w := range s.windows {
		for _, in := range w.instances(t, 1) {
			if !t.Before(in.from) && t.Before(in.to) && !s.excludedAt(w, t) {
				end := s.openUntil(w, t, in.to)
				if end.After(closes) {
					closes = end
				}
			}
		}
	}
	if !closes.IsZero() {
		return WindowVerdict{Open: true, Change: closes}
	}
	var next time.Time
	var nextWin window
	for _, w := range s.windows {
		if n, ok := s.nextOpening(w, t); ok && (next.IsZero() || n.Before(next)) {
			next, nextWin = n, w
		}
	}
	if next.IsZero() {
		return closed(time.Time{}, "none opens within a year (excluded dates?)")
	}
	return closed(next, "next opens "+describe(next, nextWin, t))
}

// NextOpen is the first moment from t on at which the schedule is open;
// false when none comes within a year.
func (s Schedule) NextOpen(t time.Time) (time.Time, bool) {
	v := s.At(t)
	switch {
	case v.Open:
		return t, true
	case v.Change.IsZero():
		return time.Time{}, false
	}
	return v.Change, true
}

func describe(next time.Time, w window, now time.Time) string {
	local := next.In(w.loc)
	if next.Sub(now) > 6*24*time.Hour {
		return local.Format("Mon 2006-01-02 15:04") + " " + w.zone
	}
	return local.Format("Mon 15:04") + " " + w.zone
}

func (s Schedule) excludedAt(w window, t time.Time) bool {
	return s.excluded[t.In(w.loc).Format(time.DateOnly)]
}

// nextMidnight is the start of the local day after t's; always after t.
func (w window) nextMidnight(t time.Time) time.Time {
	y, m, d := t.In(w.loc).Date()
	next := w.at(y, m, d+1, 0)
	if !next.After(t) { // cannot happen with at's correction; never loop on it
		next = t.Add(time.Hour)
	}
	return next
}

// openUntil is where an open stretch of an opening that contains t ends:
// its end, or the start of an excluded date inside it.
func (s Schedule) openUntil(w window, t, to time.Time) time.Time {
	for m := w.nextMidnight(t); m.Before(to); m = w.nextMidnight(m) {
		if s.excludedAt(w, m) {
			return m
		}
	}
	return to
}

// nextOpening is the first moment after t at which w is open on a date not
// excluded.
func (s Schedule) nextOpening(w window, t time.Time) (time.Time, bool) {
	for _, in := range w.instances(t, horizon) {
		if !in.to.After(t) {
			continue
		}
		at := in.from
		if at.Before(t) {
			at = t
		}
		for at.Before(in.to) {
			if !s.excludedAt(w, at) {
				return at, true
			}
			at = w.nextMidnight(at)
		}
	}
	return time.Time{}, false
}
