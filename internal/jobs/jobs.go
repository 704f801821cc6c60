// Package jobs keeps managed jobs (`kustodian run`) on the host, under the
// state directory: one JSON file per job, and a pointer to the current one.
// Every write is atomic (a temporary file renamed into place), so a crash
// or a reboot never leaves a half-written job.
package jobs

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/kustodian/kustodian/internal/atomicfile"
)

// Job states.
const (
	Pending   = "pending"   // waiting for the node's turn
	Running   = "running"   // its command runs
	Succeeded = "succeeded" // exited 0
	Failed    = "failed"    // exited non-zero, or could not run
	Rebooting = "rebooting" // exited 0 with a reboot pending; the host reboots, then the job runs again

	// A failed job with a rollback command, or retries, goes on (Next):
	RollingBack    = "rolling-back"    // its rollback command runs
	RolledBack     = "rolled-back"     // the rollback exited 0
	RollbackFailed = "rollback-failed" // the rollback exited non-zero, or could not run
	Retrying       = "retrying"        // failed (and rolled back); runs again at RetryAt
)

// Reboot policies.
const (
	RebootAuto  = "auto"
	RebootNever = "never"
)

// MaxRuns bounds reboot-and-rerun: a job that still wants a reboot after so
// many runs fails instead of rebooting the host forever.
const MaxRuns = 5

// Job is one managed job.
type Job struct {
	ID        string    `json:"id"`
	Command   []string  `json:"command"`
	Reboot    string    `json:"reboot"`
	Created   time.Time `json:"created"`
	State     string    `json:"state"`
	Runs      int       `json:"runs"`
	ExitCode  *int      `json:"exitCode,omitempty"`
	LastLines []string  `json:"lastLines,omitempty"`
	Started   time.Time `json:"started,omitzero"`
	Finished  time.Time `json:"finished,omitzero"`
	Message   string    `json:"message,omitempty"`
	// Boot, while Rebooting, is the boot the job asked to end: the job
	// runs again in any other.
	Boot string `json:"boot,omitempty"`
	// FailedBoot is the boot the job failed in (the agent does not ask for
	// a reboot again in that boot).
	FailedBoot string `json:"failedBoot,omitempty"`
	// Dir is the directory the command runs in ("": the runner's).
	Dir string `json:"dir,omitempty"`

	// Rollback runs after the command failed, before the job is held or
	// run again; its exit code and last lines are kept apart.
	Rollback          []string `json:"rollback,omitempty"`
	RollbackExitCode  *int     `json:"rollbackExitCode,omitempty"`
	RollbackLastLines []string `json:"rollbackLastLines,omitempty"`
	// Retries is how many times a failed job runs again, Backoff after
	// the first failure, doubling; Attempts counts the attempts so far
	// (0 in jobs written before retries: one), and RunsBefore the runs
	// before this attempt (reboots are bounded per attempt).
	Retries    int           `json:"retries,omitempty"`
	Backoff    time.Duration `json:"backoff,omitempty"`
	Attempts   int           `json:"attempts,omitempty"`
	RunsBefore int           `json:"runsBefore,omitempty"`
	RetryAt    time.Time     `json:"retryAt,omitzero"`
	// Final: a failure that neither a rollback nor a retry can help (a
	// reboot that cannot be made, or that is still pending after MaxRuns).
	Final bool `json:"final,omitempty"`
	// Rollout is the MaintenanceRollout the job runs, if any.
	Rollout *RolloutRef `json:"rollout,omitempty"`
}

// RolloutRef names a MaintenanceRollout's revision.
type RolloutRef struct {
	Name     string `json:"name"`
	UID      string `json:"uid"`
	Revision string `json:"revision"`
}

// attempts is the number of attempts so far, at least one.
func (j *Job) attempts() int { return max(j.Attempts, 1) }

// Held reports whether the job failed for good: the node keeps its lock
// and cordon until an operator acts.
func (j *Job) Held() bool {
	switch j.State {
	case RollbackFailed:
		return true
	case RolledBack:
		return j.Final || j.attempts() > j.Retries
	case Failed:
		return j.Final || len(j.Rollback) == 0 && j.attempts() > j.Retries
	}
	return false
}

// Done reports whether the job has ended for good.
func (j *Job) Done() bool { return j.State == Succeeded || j.Held() }

var validID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// ValidID checks a job ID given by a user.
func ValidID(id string) error {
	if !validID.MatchString(id) {
		return fmt.Errorf("job id %q: use letters, digits, '.', '_' and '-' (at most 63)", id)
	}
	return nil
}

// Store is the jobs directory of a host.
type Store struct{ Dir string }

// DirIn is where a host's jobs are kept in the agent's state directory.
func DirIn(stateDir string) string { return filepath.Join(stateDir, "jobs") }

// StoreIn is the jobs of the host whose state directory is stateDir: the
// agent's and kustodian run's alike.
func StoreIn(stateDir string) Store { return Store{Dir: DirIn(stateDir)} }

func (s Store) path(id string) string { return filepath.Join(s.Dir, id+".json") }
func (s Store) currentPath() string   { return filepath.Join(s.Dir, "current") }

// ErrBusy says a job is already current and not done.
var ErrBusy = errors.New("a managed job is already in progress on this host")

// Create records a new job as the current one.
func (s Store) Create(j *Job) error {
	if err := ValidID(j.ID); err != nil {
		return err
	}
	if cur, err := s.Current(); err != nil {
		return err
	} else if cur != nil && !cur.Done() {
		return fmt.Errorf("%w (job %s, %s)", ErrBusy, cur.ID, cur.State)
	}
	if _, err := os.Stat(s.path(j.ID)); err == nil {
		return fmt.Errorf("job %s exists already in %s; choose another --id", j.ID, s.Dir)
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return err
	}
	if err := s.Save(j); err != nil {
		return err
	}
	return atomicfile.Write(s.currentPath(), []byte(j.ID+"\n"), 0o600)
}

// Current returns the current job, nil when there is none.
func (s Store) Current() (*Job, error) {
	b, err := os.ReadFile(s.currentPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return s.Get(strings.TrimSpace(string(b)))
}

// Get reads a job.
func (s Store) Get(id string) (*Job, error) {
	b, err := os.ReadFile(s.path(id))
	if err != nil {
		return nil, fmt.Errorf("job %s: %w", id, err)
	}
	var j Job
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("job %s: %s is corrupt: %w", id, s.path(id), err)
	}
	if boot, ok := strings.CutPrefix(j.Message, "boot "); ok && j.State == Rebooting && j.Boot == "" {
		j.Boot, j.Message = boot, "" // as earlier agents wrote it
	}
	return &j, nil
}

// Save writes a job.
func (s Store) Save(j *Job) error {
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(s.path(j.ID), append(b, '\n'), 0o600)
}

// Discard removes a job that never started (its request could not be
// made), and forgets it as the current one.
func (s Store) Discard(id string) error {
	if cur, err := s.Current(); err == nil && cur != nil && cur.ID == id {
		if err := s.ClearCurrent(); err != nil {
			return err
		}
	}
	err := os.Remove(s.path(id))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// ClearCurrent forgets the current job (its file stays as a record).
func (s Store) ClearCurrent() error {
	err := os.Remove(s.currentPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
