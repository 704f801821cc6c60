package jobs

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Each state of a job, with what the host says, leads to one step: the
// job as saved, what the agent does, and the record's line.
func TestNext(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	code, one, two := 0, 1, 2
	base := Job{ID: "patch", Command: []string{"apt-get", "upgrade"}, Reboot: RebootAuto}
	with := func(change func(*Job)) Job {
		j := base
		change(&j)
		return j
	}
	facts := Facts{Now: now, Boot: "boot-2", CanReboot: true, Unit: "kustodian-job-patch.service"}
	withFacts := func(change func(*Facts)) Facts {
		f := facts
		change(&f)
		return f
	}
	for _, tc := range []struct {
		name     string
		job      Job
		facts    Facts
		state    string
		save     bool
		do       Do
		failed   bool
		again    bool
		runs     int
		message  string // a part of the record's line
		jobCheck func(Job) string
	}{
		{name: "pending: it starts", job: with(func(j *Job) { j.State = Pending }), facts: facts,
			state: Running, save: true, do: Start, runs: 1, message: "job patch (run 1): running",
			jobCheck: func(j Job) string {
				if !j.Started.Equal(now) {
					return "Started not set to now"
				}
				return ""
			}},
		{name: "a start after a run clears its result", job: with(func(j *Job) {
			j.State, j.Runs, j.ExitCode, j.LastLines, j.Message = Pending, 1, &code, []string{"old"}, "old"
		}), facts: facts, state: Running, save: true, do: Start, runs: 2, message: "(run 2): running",
			jobCheck: func(j Job) string {
				if j.ExitCode != nil || j.LastLines != nil || j.Message != "" {
					return "the last run's result was kept"
				}
				return ""
			}},
		{name: "rebooting, same boot, asked: it waits for the reboot", job: with(func(j *Job) { j.State, j.Boot, j.Runs = Rebooting, "boot-2", 1 }),
			facts: withFacts(func(f *Facts) { f.RebootAsked = true }), state: Rebooting, do: Wait, runs: 1, message: "rebooting for job patch"},
		{name: "rebooting, same boot, not asked (refused, or an agent restarted): it asks again", job: with(func(j *Job) { j.State, j.Boot, j.Runs = Rebooting, "boot-2", 1 }),
			facts: facts, state: Rebooting, do: Reboot, runs: 1, message: "rebooting for job patch"},
		{name: "rebooting, another boot: it runs again", job: with(func(j *Job) { j.State, j.Boot, j.Runs = Rebooting, "boot-1", 1 }), facts: facts,
			state: Running, save: true, do: Start, runs: 2, message: "(run 2): running",
			jobCheck: func(j Job) string {
				if j.Boot != "" {
					return "Boot kept after the reboot"
				}
				return ""
			}},
		{name: "running and alive: it waits", job: with(func(j *Job) { j.State, j.Runs = Running, 1 }), facts: withFacts(func(f *Facts) { f.Alive = true }),
			state: Running, do: Wait, runs: 1, message: "running"},
		{name: "running, dead: it runs again", job: with(func(j *Job) { j.State, j.Runs = Running, 1 }), facts: facts,
			state: Pending, save: true, do: Wait, again: true, runs: 1, message: "pending"},
		{name: "succeeded, no reboot: it ends", job: with(func(j *Job) { j.State, j.Runs = Succeeded, 1 }), facts: facts,
			state: Succeeded, do: Finish, again: true, runs: 1, message: "succeeded"},
		{name: "succeeded, reboot pending: it reboots", job: with(func(j *Job) { j.State, j.Runs = Succeeded, 1 }), facts: withFacts(func(f *Facts) { f.RebootPending = true }),
			state: Rebooting, save: true, do: Reboot, runs: 1, message: "rebooting for job patch (run 1): rebooting",
			jobCheck: func(j Job) string {
				if j.Boot != "boot-2" {
					return "Boot is " + j.Boot + ", want this boot"
				}
				return ""
			}},
		{name: "succeeded, reboot pending, reboot never: it ends", job: with(func(j *Job) { j.State, j.Runs, j.Reboot = Succeeded, 1, RebootNever }),
			facts: withFacts(func(f *Facts) { f.RebootPending = true }), state: Succeeded, do: Finish, again: true, runs: 1, message: "succeeded"},
		{name: "a reboot still pending after MaxRuns: it fails", job: with(func(j *Job) { j.State, j.Runs = Succeeded, MaxRuns }),
			facts: withFacts(func(f *Facts) { f.RebootPending = true }), state: Failed, save: true, failed: true, runs: MaxRuns,
			message: "a reboot is still pending after 5 runs"},
		{name: "no logind to reboot: it fails", job: with(func(j *Job) { j.State, j.Runs = Succeeded, 1 }),
			facts: withFacts(func(f *Facts) { f.RebootPending, f.CanReboot = true, false }), state: Failed, save: true, failed: true, runs: 1,
			message: "logind cannot be reached"},
		{name: "failed with a rollback: it rolls back", job: with(func(j *Job) { j.State, j.Runs, j.ExitCode, j.Rollback = Failed, 1, &one, []string{"undo"} }), facts: facts,
			state: RollingBack, save: true, do: Start, runs: 1, message: "rolling-back, exit 1"},
		{name: "rolling back, alive: it waits", job: with(func(j *Job) { j.State, j.Runs, j.Rollback = RollingBack, 1, []string{"undo"} }),
			facts: withFacts(func(f *Facts) { f.Alive = true }), state: RollingBack, runs: 1, message: "rolling-back"},
		{name: "rolling back, dead: the rollback runs again", job: with(func(j *Job) { j.State, j.Runs, j.Rollback = RollingBack, 1, []string{"undo"} }),
			facts: facts, state: RollingBack, save: true, do: Start, runs: 1, message: "rolling-back"},
		{name: "rolled back, no retries: the node holds", job: with(func(j *Job) { j.State, j.Runs, j.Attempts, j.Rollback = RolledBack, 1, 1, []string{"undo"} }),
			facts: facts, state: RolledBack, failed: true, runs: 1, message: "rolled-back"},
		{name: "rollback failed: the node holds, retries or not", job: with(func(j *Job) {
			j.State, j.Runs, j.Attempts, j.Retries, j.Rollback, j.RollbackExitCode = RollbackFailed, 1, 1, 3, []string{"undo"}, &two
		}), facts: facts, state: RollbackFailed, failed: true, runs: 1, message: "rollback exit 2"},
		{name: "rolled back with retries left: it runs again after the backoff", job: with(func(j *Job) {
			j.State, j.Runs, j.Attempts, j.Retries, j.Backoff, j.Rollback = RolledBack, 1, 1, 2, time.Minute, []string{"undo"}
		}), facts: facts, state: Retrying, save: true, runs: 1, message: "attempt 2 of 3",
			jobCheck: func(j Job) string {
				if !j.RetryAt.Equal(now.Add(time.Minute)) {
					return "RetryAt " + j.RetryAt.String()
				}
				return ""
			}},
		{name: "failed, no rollback, second attempt: the backoff doubles", job: with(func(j *Job) {
			j.State, j.Runs, j.Attempts, j.Retries, j.Backoff = Failed, 2, 2, 2, time.Minute
		}), facts: facts, state: Retrying, save: true, runs: 2, message: "attempt 3 of 3",
			jobCheck: func(j Job) string {
				if !j.RetryAt.Equal(now.Add(2 * time.Minute)) {
					return "RetryAt " + j.RetryAt.String()
				}
				return ""
			}},
		{name: "failed, retries used up: the node holds", job: with(func(j *Job) { j.State, j.Runs, j.Attempts, j.Retries = Failed, 3, 3, 2 }),
			facts: facts, state: Failed, failed: true, runs: 3, message: "held"},
		{name: "retrying, not yet: it waits", job: with(func(j *Job) {
			j.State, j.Runs, j.Attempts, j.Retries, j.RetryAt = Retrying, 1, 1, 2, now.Add(time.Second)
		}),
			facts: facts, state: Retrying, runs: 1, message: "retrying"},
		{name: "retrying, due: the next attempt starts", job: with(func(j *Job) { j.State, j.Runs, j.Attempts, j.Retries, j.RetryAt = Retrying, 3, 1, 2, now }),
			facts: facts, state: Running, save: true, do: Start, runs: 4, message: "(run 4): running",
			jobCheck: func(j Job) string {
				if j.Attempts != 2 || j.RunsBefore != 3 {
					return fmt.Sprintf("attempts %d, runs before %d", j.Attempts, j.RunsBefore)
				}
				return ""
			}},
		{name: "a reboot that cannot be made is final: no retry", job: with(func(j *Job) { j.State, j.Runs, j.Retries = Succeeded, 1, 3 }),
			facts: withFacts(func(f *Facts) { f.RebootPending, f.CanReboot = true, false }), state: Failed, save: true, failed: true, runs: 1,
			message: "logind cannot be reached"},
		{name: "reboots are bounded per attempt", job: with(func(j *Job) { j.State, j.Runs, j.RunsBefore, j.Attempts, j.Retries = Succeeded, 6, 3, 2, 3 }),
			facts: withFacts(func(f *Facts) { f.RebootPending = true }), state: Rebooting, save: true, do: Reboot, runs: 6, message: "rebooting"},
		{name: "failed: the node holds", job: with(func(j *Job) { j.State, j.Runs, j.ExitCode = Failed, 1, &code }), facts: facts,
			state: Failed, failed: true, runs: 1, message: "the lock and the cordon are held (journalctl -u kustodian-job-patch.service)"},
	} {
		s, err := Next(tc.job, tc.facts)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if s.Job.State != tc.state || s.Save != tc.save || s.Do != tc.do || s.Failed != tc.failed || s.Again != tc.again || s.Job.Runs != tc.runs {
			t.Errorf("%s: state %s save %v do %v failed %v again %v runs %d, want %s %v %v %v %v %d",
				tc.name, s.Job.State, s.Save, s.Do, s.Failed, s.Again, s.Job.Runs, tc.state, tc.save, tc.do, tc.failed, tc.again, tc.runs)
		}
		if !strings.Contains(s.Message, tc.message) {
			t.Errorf("%s: message %q lacks %q", tc.name, s.Message, tc.message)
		}
		if tc.jobCheck != nil {
			if why := tc.jobCheck(s.Job); why != "" {
				t.Errorf("%s: %s", tc.name, why)
			}
		}
	}
	if _, err := Next(with(func(j *Job) { j.State = "exploded" }), facts); err == nil {
		t.Error("an unknown state was accepted")
	}
	s := StartFailed(with(func(j *Job) { j.State, j.Runs = Running, 1 }), facts, errors.New("systemd-run: no such unit"))
	if s.Job.State != Failed || !s.Save || !s.Failed || !strings.Contains(s.Message, "systemd-run: no such unit") {
		t.Errorf("StartFailed: %+v", s)
	}
	s = StartFailed(with(func(j *Job) { j.State, j.Runs, j.Rollback = Running, 1, []string{"undo"} }), facts, errors.New("no such unit"))
	if s.Job.State != RollingBack || !s.Save || s.Failed || s.Do != Start {
		t.Errorf("StartFailed with a rollback: %+v, want its rollback started", s)
	}
	s = StartFailed(s.Job, facts, errors.New("no such unit"))
	if s.Job.State != RollbackFailed || !s.Save || !s.Failed {
		t.Errorf("StartFailed of the rollback: %+v, want the node held", s)
	}
}

// A job an earlier agent left Rebooting kept its boot in its message: it
// reads as the boot, so that the job does not run again in the same boot.
func TestGetReadsAnOldRebootingJob(t *testing.T) {
	s := Store{Dir: t.TempDir()}
	if err := s.Save(&Job{ID: "old", State: Rebooting, Message: "boot abc"}); err != nil {
		t.Fatal(err)
	}
	j, err := s.Get("old")
	if err != nil || j.Boot != "abc" || j.Message != "" {
		t.Fatalf("got %+v %v", j, err)
	}
}
