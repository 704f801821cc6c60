package history

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/rollout"
)

func TestAppendKeepsTheLastEntriesWithinBounds(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	value := ""
	for i := range MaxEntries + 5 {
		value = Append(value, Entry{Requested: t0.Add(time.Duration(i) * time.Hour), Ended: t0.Add(time.Duration(i)*time.Hour + time.Minute),
			Result: Succeeded, Reason: "kernel"})
	}
	got, err := Parse(value)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != MaxEntries || !got[0].Requested.Equal(t0.Add(5*time.Hour)) || !got[MaxEntries-1].Requested.Equal(t0.Add(time.Duration(MaxEntries+4)*time.Hour)) {
		t.Errorf("%d entries from %v to %v", len(got), got[0].Requested, got[len(got)-1].Requested)
	}

	// Long messages are cut, and the bytes bound drops the oldest.
	long := strings.Repeat("é", 2*MaxMessage)
	for range MaxEntries {
		value = Append(value, Entry{Requested: t0, Ended: t0, Result: Failed, Message: long, Reason: long})
	}
	if len(value) > MaxBytes {
		t.Errorf("%d bytes, want at most %d", len(value), MaxBytes)
	}
	got, _ = Parse(value)
	last := got[len(got)-1]
	if n := len([]rune(last.Message)); n != MaxMessage || !strings.HasSuffix(last.Message, "…") {
		t.Errorf("message of %d runes", n)
	}
	if !json.Valid([]byte(value)) {
		t.Error("not JSON")
	}
}

func TestDurations(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	e := Entry{Requested: t0, Started: t0.Add(time.Minute), Drained: t0.Add(3 * time.Minute), Ended: t0.Add(13 * time.Minute)}
	if e.Wait() != time.Minute || e.Drain() != 2*time.Minute || e.Maintenance() != 10*time.Minute {
		t.Errorf("wait %s, drain %s, maintenance %s", e.Wait(), e.Drain(), e.Maintenance())
	}
	failedInDrain := Entry{Requested: t0, Started: t0.Add(time.Minute), Ended: t0.Add(5 * time.Minute), Result: Failed}
	if failedInDrain.Drain() != 0 || failedInDrain.Maintenance() != 0 {
		t.Errorf("a maintenance that failed in its drain: drain %s, maintenance %s", failedInDrain.Drain(), failedInDrain.Maintenance())
	}
}

func TestAppendReplacesWhatDoesNotParse(t *testing.T) {
	value := Append("{not json", Entry{Result: Succeeded})
	got, err := Parse(value)
	if err != nil || len(got) != 1 {
		t.Errorf("%v %v", got, err)
	}
	if _, err := Parse("{not json"); err == nil || !strings.Contains(err.Error(), Annotation) {
		t.Errorf("Parse of a bad value: %v", err)
	}
}

// An entry lists a patch campaign's first packages and how many more.
func TestPackageLinesAreBounded(t *testing.T) {
	var changes []rollout.PackageChange
	for i := range MaxPackages + 3 {
		changes = append(changes, rollout.PackageChange{Name: fmt.Sprintf("p%d", i), From: "1", To: "2"})
	}
	changes[0].From = ""
	got := PackageLines(changes)
	if len(got) != MaxPackages+1 || got[0] != "p0 (new) -> 2" || got[1] != "p1 1 -> 2" || got[MaxPackages] != "and 3 more" {
		t.Errorf("lines %q", got)
	}
}
