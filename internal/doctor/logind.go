package doctor

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// logindDropInDirs are where logind reads its drop-ins, the first winning
// over the others for a file of the same name.
var logindDropInDirs = []string{"etc/systemd/logind.conf.d", "run/systemd/logind.conf.d", "usr/local/lib/systemd/logind.conf.d", "usr/lib/systemd/logind.conf.d", "lib/systemd/logind.conf.d"}

// LogindDropIns reads logind's configuration under root ("/" on a host)
// the way logind does: logind.conf, then the drop-ins by name (a name in
// /etc hides the same name in /run and /usr/lib), and returns the files
// that set InhibitDelayMaxSec, in that order: the last one wins.
func LogindDropIns(root string) ([]DropIn, error) {
	files := []string{filepath.Join(root, "etc/systemd/logind.conf")}
	byName := map[string]string{}
	for _, dir := range logindDropInDirs {
		entries, err := os.ReadDir(filepath.Join(root, dir))
		if err != nil && !os.IsNotExist(err) {
			return nil, err
		}
		for _, e := range entries {
			if e.IsDir() || !strings.HasSuffix(e.Name(), ".conf") {
				continue
			}
			if _, hidden := byName[e.Name()]; !hidden {
				byName[e.Name()] = filepath.Join(root, dir, e.Name())
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		files = append(files, byName[n])
	}
	var out []DropIn
	for _, f := range files {
		d, ok, err := inhibitDelayIn(f)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, DropIn{Path: strings.TrimPrefix(f, strings.TrimSuffix(root, "/")), Delay: d})
		}
	}
	return out, nil
}

// inhibitDelayIn reads InhibitDelayMaxSec from the [Login] section of a
// file (the last setting in it); ok is false when it sets none.
func inhibitDelayIn(path string) (d time.Duration, ok bool, err error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
			continue
		case strings.HasPrefix(line, "["):
			section = strings.Trim(line, "[]")
			continue
		}
		key, value, found := strings.Cut(line, "=")
		if !found || section != "Login" || strings.TrimSpace(key) != "InhibitDelayMaxSec" {
			continue
		}
		if d, err = ParseTimespan(strings.TrimSpace(value)); err != nil {
			return 0, false, fmt.Errorf("%s: InhibitDelayMaxSec: %w", path, err)
		}
		ok = true
	}
	return d, ok, sc.Err()
}

// timespanUnits are systemd's time span units.
var timespanUnits = map[string]time.Duration{
	"us": time.Microsecond, "usec": time.Microsecond, "ms": time.Millisecond, "msec": time.Millisecond,
	"s": time.Second, "sec": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	"w": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
	"M": 2629800 * time.Second, "month": 2629800 * time.Second, "months": 2629800 * time.Second,
	"y": 31557600 * time.Second, "year": 31557600 * time.Second, "years": 31557600 * time.Second,
	"ns": time.Nanosecond, "nsec": time.Nanosecond,
}

// Infinity is what "infinity" parses to: longer than any grace period.
const Infinity = time.Duration(1<<63 - 1)

// ParseTimespan parses a systemd time span in seconds' context: "30",
// "30s", "1min 30s", "2m30s", "infinity".
func ParseTimespan(s string) (time.Duration, error) {
	if s == "infinity" {
		return Infinity, nil
	}
	if n, err := strconv.ParseFloat(s, 64); err == nil {
		return time.Duration(n * float64(time.Second)), nil
	}
	var total time.Duration
	rest := strings.TrimSpace(s)
	if rest == "" {
		return 0, fmt.Errorf("empty time span")
	}
	for rest != "" {
		i := strings.IndexFunc(rest, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
		if i <= 0 {
			return 0, fmt.Errorf("%q is not a time span", s)
		}
		n, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a time span", s)
		}
		rest = strings.TrimLeft(rest[i:], " ")
		j := strings.IndexFunc(rest, func(r rune) bool { return (r >= '0' && r <= '9') || r == ' ' })
		if j < 0 {
			j = len(rest)
		}
		unit, ok := timespanUnits[rest[:j]]
		if !ok {
			return 0, fmt.Errorf("%q is not a time span (unit %q)", s, rest[:j])
		}
		total += time.Duration(n * float64(unit))
		rest = strings.TrimLeft(rest[j:], " ")
	}
	return total, nil
}
