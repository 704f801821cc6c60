package policy

import (
	"strings"
	"testing"
	"time"
)

func mustSchedule(t *testing.T, ws []Window, excluded ...string) Schedule {
	t.Helper()
	s, err := ParseSchedule(ws, excluded)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func at(t *testing.T, zone, s string) time.Time {
	t.Helper()
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	v, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestWindows(t *testing.T) {
	const berlin = "Europe/Berlin"
	weekend := []Window{{Days: []string{"Sat", "Sun"}, Start: "02:00", End: "06:00", TimeZone: berlin}}
	night := []Window{{Start: "22:00", End: "04:00", TimeZone: berlin}} // across midnight, every day
	friNight := []Window{{Days: []string{"Fri"}, Start: "23:00", End: "01:00"}}
	for _, tc := range []struct {
		name     string
		windows  []Window
		excluded []string
		now      time.Time
		open     bool
		change   time.Time
		reason   string
	}{
		{"no windows: always open", nil, nil, at(t, "UTC", "2026-11-23 12:00"), true, time.Time{}, ""},
		// 2026-11-28 is a Saturday.
		{"inside the weekend window", weekend, nil, at(t, berlin, "2026-11-28 03:00"), true, at(t, berlin, "2026-11-28 06:00"), ""},
		{"at its start: open", weekend, nil, at(t, berlin, "2026-11-28 02:00"), true, at(t, berlin, "2026-11-28 06:00"), ""},
		{"at its end: closed", weekend, nil, at(t, berlin, "2026-11-28 06:00"), false, at(t, berlin, "2026-11-29 02:00"), "next opens Sun 02:00 Europe/Berlin"},
		{"a Monday: next Saturday", weekend, nil, at(t, berlin, "2026-11-23 10:00"), false, at(t, berlin, "2026-11-28 02:00"), "next opens Sat 02:00 Europe/Berlin"},
		{"the time zone counts, not UTC", weekend, nil, at(t, "UTC", "2026-11-28 01:30"), true, at(t, berlin, "2026-11-28 06:00"), ""},
		{"across midnight: before midnight", night, nil, at(t, berlin, "2026-11-23 23:30"), true, at(t, berlin, "2026-11-24 04:00"), ""},
		{"across midnight: after midnight", night, nil, at(t, berlin, "2026-11-24 03:59"), true, at(t, berlin, "2026-11-24 04:00"), ""},
		{"across midnight: closed by day", night, nil, at(t, berlin, "2026-11-24 12:00"), false, at(t, berlin, "2026-11-24 22:00"), "next opens Tue 22:00"},
		{"a Friday window runs into Saturday", friNight, nil, at(t, "UTC", "2026-11-28 00:30"), true, at(t, "UTC", "2026-11-28 01:00"), ""},
		{"but does not start on Saturday", friNight, nil, at(t, "UTC", "2026-11-28 23:30"), false, at(t, "UTC", "2026-12-04 23:00"), "next opens Fri 23:00 UTC"},
		{"an excluded date closes it", weekend, []string{"2026-11-28"}, at(t, berlin, "2026-11-28 03:00"), false, at(t, berlin, "2026-11-29 02:00"), "next opens Sun 02:00"},
		{"an excluded date skips an opening", weekend, []string{"2026-11-28", "2026-11-29"}, at(t, berlin, "2026-11-27 12:00"), false, at(t, berlin, "2026-12-05 02:00"), "next opens Sat 2026-12-05 02:00 Europe/Berlin"},
		{"an excluded date cuts a window across midnight", night, []string{"2026-12-24"}, at(t, berlin, "2026-12-23 23:00"), true, at(t, berlin, "2026-12-24 00:00"), ""},
		{"and opens it again the day after", night, []string{"2026-12-24"}, at(t, berlin, "2026-12-24 01:00"), false, at(t, berlin, "2026-12-25 00:00"), "next opens Fri 00:00"},
		// DST: Berlin springs forward on 2027-03-28 at 02:00 (to 03:00) and
		// falls back on 2026-10-25 at 03:00 (to 02:00).
		// A start that does not exist moves forward by the gap, as Go's
		// time.Date does: 02:30 becomes 03:30 CEST.
		{"spring forward: a start in the gap moves by the gap", []Window{{Start: "02:30", End: "05:00", TimeZone: berlin}}, nil,
			at(t, berlin, "2027-03-28 01:00"), false, time.Date(2027, 3, 28, 1, 30, 0, 0, time.UTC), "next opens Sun 03:30"},
		{"fall back: 02:00-03:00 lasts two hours", []Window{{Start: "02:00", End: "03:00", TimeZone: berlin}}, nil,
			time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC), true, time.Date(2026, 10, 25, 2, 0, 0, 0, time.UTC), ""},
		{"whole days", []Window{{Days: []string{"Sun"}, Start: "00:00", End: "24:00"}}, nil,
			at(t, "UTC", "2026-11-29 23:59"), true, at(t, "UTC", "2026-11-30 00:00"), ""},
		// Azores springs forward at midnight: 2026-03-29 00:00 does not
		// exist (23:59:59 -01:00 is followed by 01:00 +00:00).
		{"a DST gap at midnight: across it", []Window{{Start: "22:00", End: "02:00", TimeZone: "Atlantic/Azores"}}, nil,
			at(t, "Atlantic/Azores", "2026-03-28 22:30"), true, at(t, "Atlantic/Azores", "2026-03-29 02:00"), ""},
		{"a DST gap at midnight: a whole day with an excluded date", []Window{{Start: "00:00", End: "24:00", TimeZone: "Atlantic/Azores"}}, []string{"2026-03-28"},
			at(t, "Atlantic/Azores", "2026-03-28 12:00"), false, at(t, "Atlantic/Azores", "2026-03-29 01:00"), "next opens Sun 01:00 Atlantic/Azores"},
		{"a DST gap at midnight: a window from 00:00 opens when the day begins", []Window{{Days: []string{"Sun"}, Start: "00:00", End: "03:00", TimeZone: "Atlantic/Azores"}}, nil,
			at(t, "Atlantic/Azores", "2026-03-28 22:00"), false, at(t, "Atlantic/Azores", "2026-03-29 01:00"), "next opens Sun 01:00"},
		{"Santiago's gap at midnight", []Window{{Days: []string{"Sat"}, Start: "20:00", End: "04:00", TimeZone: "America/Santiago"}}, nil,
			at(t, "America/Santiago", "2026-09-05 21:00"), true, at(t, "America/Santiago", "2026-09-06 04:00"), ""},
		{"several windows: any", append(append([]Window{}, weekend...), night...), nil, at(t, berlin, "2026-11-24 23:00"), true, at(t, berlin, "2026-11-25 04:00"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := mustSchedule(t, tc.windows, tc.excluded...).At(tc.now)
			if v.Open != tc.open || !v.Change.Equal(tc.change) || !strings.Contains(v.Reason, tc.reason) {
				t.Errorf("got open=%v change=%s reason=%q, want open=%v change=%s reason~%q", v.Open, v.Change, v.Reason, tc.open, tc.change, tc.reason)
			}
			if !tc.open && !strings.HasPrefix(v.Reason, "outside window: ") {
				t.Errorf("reason %q does not say which gate", v.Reason)
			}
		})
	}
}

func TestBadWindows(t *testing.T) {
	for _, tc := range []struct {
		w    Window
		ex   []string
		want string
	}{
		{Window{Start: "2:00", End: "06:00"}, nil, `windows[0].start: "2:00" is not HH:MM`},
		{Window{Start: "02:00", End: "25:00"}, nil, `windows[0].end: "25:00" is not a time of day`},
		{Window{Start: "24:00", End: "06:00"}, nil, `windows[0].start: "24:00" is not a time of day`},
		{Window{Start: "02:00", End: "02:00"}, nil, "would be empty"},
		{Window{Days: []string{"Saturday"}, Start: "02:00", End: "06:00"}, nil, `windows[0].days: "Saturday" is not one of Mon, Tue`},
		{Window{Start: "02:00", End: "06:00", TimeZone: "Mars/Olympus"}, nil, `windows[0].timeZone: "Mars/Olympus" is not an IANA time zone`},
		{Window{Start: "02:00", End: "06:00", TimeZone: "Local"}, nil, `"Local" is not an IANA time zone`},
		{Window{Start: "02:00", End: "06:00"}, []string{"2026-13-01"}, `excludeDates[0]: "2026-13-01" is not a date`},
	} {
		_, err := ParseSchedule([]Window{tc.w}, tc.ex)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: got %v, want %q", tc.w, err, tc.want)
		}
	}
}
