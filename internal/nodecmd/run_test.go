package nodecmd

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/kustodian/kustodian/internal/jobs"
)

// A failed job's exit code reaches automation as it is, unless it would
// read as "still going" (75) or "blocked" (76), or says nothing (0, none).
func TestFailedJobExitCode(t *testing.T) {
	code := func(c int) *int { return &c }
	for _, tc := range []struct {
		name string
		job  *int
		want int
	}{
		{"its own code", code(4), 4},
		{"a signal's code", code(143), 143},
		{"no code: the command did not start", nil, 1},
		{"zero, yet failed", code(0), 1},
		{"75 would read as pending", code(ExitPending), 1},
		{"76 would read as blocked", code(ExitBlocked), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &jobs.Job{ID: "j", State: jobs.Failed, ExitCode: tc.job}
			ended, err := jobEnded(j, filepath.Join(t.TempDir(), "maintenance-required"))
			var got exitCode
			if !ended || !errors.As(err, &got) {
				t.Fatalf("jobEnded = %v, %v; want ended with an exit code", ended, err)
			}
			if int(got) != tc.want {
				t.Errorf("exit code %d, want %d", got, tc.want)
			}
		})
	}
}
