package jobs

import (
	"fmt"
	"time"
)

// Facts are what a job's next step depends on besides the job itself.
type Facts struct {
	Now time.Time
	// Boot identifies this boot of the host: a job that rebooted the host
	// runs again once the boot is another.
	Boot string
	// RebootPending: the host's reboot sentinel exists.
	RebootPending bool
	// CanReboot: logind can be reached to reboot the host.
	CanReboot bool
	// RebootAsked, for a Rebooting job: this agent asked for the reboot
	// and logind took the request. Without it (the request failed, or an
	// agent restarted in the same boot) the reboot is asked again.
	RebootAsked bool
	// Alive, for a Running job: its command still runs (looked up by the
	// caller, which then passes the job as stored: it may have just ended).
	Alive bool
	// Unit is where the job's output is (its systemd unit), for messages.
	Unit string
}

// Do is what the agent does for a step, once the job is saved.
type Do int

const (
	// Wait: nothing but report the job.
	Wait Do = iota
	// Start runs the job's command.
	Start
	// Reboot reboots the host, keeping the lock and the cordon.
	Reboot
	// Finish ends the job: it is no longer the current one, and the
	// request the agent made for it goes.
	Finish
)

// Step is the next step of a job while its node is in maintenance.
type Step struct {
	// Job is the job after the step; Save says it changed and must be
	// saved before anything is done.
	Job  Job
	Save bool
	Do   Do
	// Message is the node record's line; Failed says the job, and so the
	// maintenance, failed.
	Message string
	Failed  bool
	// Again: decide again at once (the job moved on by itself).
	Again bool
	// WakeAt: decide again then (a retry is due); zero: at the next change.
	WakeAt time.Time
	// Log is what happened, for the agent's log ("" when nothing did);
	// Warn says it is a warning.
	Log  string
	Warn bool
}

// Next is a job's next step: run it (again after a reboot, or when its
// command died with the agent or the host), reboot the host when the job
// succeeded and a reboot is pending (at most MaxRuns times), or end it.
func Next(j Job, f Facts) (Step, error) {
	s := Step{Job: j}
	switch j.State {
	case Rebooting:
		if j.Boot == f.Boot {
			s.Message = "rebooting for " + j.Summary()
			if !f.RebootAsked {
				// The request failed, or died with an agent: the host
				// would wait for a reboot nobody asked for.
				s.Do = Reboot
				s.Log, s.Warn = "the reboot was not taken; asking for it again", true
			}
			return s, nil // asked; the host goes down soon
		}
		return start(s, f, "job runs again after the reboot"), nil
	case Pending:
		return start(s, f, "job started"), nil
	case Retrying:
		if f.Now.Before(j.RetryAt) {
			s.Message, s.WakeAt = j.Summary(), j.RetryAt
			return s, nil
		}
		s.Job.Attempts, s.Job.RunsBefore = j.attempts()+1, j.Runs
		return start(s, f, fmt.Sprintf("job runs again: attempt %d of %d", j.attempts()+1, j.Retries+1)), nil
	case Running, RollingBack:
		if f.Alive {
			s.Message = j.Summary()
			return s, nil
		}
		if j.State == RollingBack {
			// It died with the agent or the host: rollbacks are
			// idempotent too, run it again.
			s.Save, s.Do = true, Start
			s.Message = j.Summary()
			s.Log, s.Warn = "the rollback is not running any more; running it again", true
			return s, nil
		}
		// It died with the agent or the host: jobs are idempotent, run again.
		s.Job.State = Pending
		s.Save, s.Again = true, true
		s.Message = s.Job.Summary()
		s.Log, s.Warn = "job is not running any more; running it again", true
		return s, nil
	case Succeeded:
		if f.RebootPending && j.Reboot == RebootAuto {
			switch {
			case j.Runs-j.RunsBefore >= MaxRuns:
				return failed(s, f, fmt.Sprintf("a reboot is still pending after %d runs", j.Runs-j.RunsBefore)), nil
			case !f.CanReboot:
				return failed(s, f, "a reboot is pending but logind cannot be reached to reboot"), nil
			}
			s.Job.State, s.Job.Boot, s.Job.Message = Rebooting, f.Boot, ""
			s.Save, s.Do = true, Reboot
			s.Message = "rebooting for " + s.Job.Summary()
			s.Log = "job succeeded and a reboot is pending: rebooting, keeping the lock"
			return s, nil
		}
		s.Do, s.Again = Finish, true
		s.Message = j.Summary()
		s.Log = "job succeeded"
		return s, nil
	case Failed, RolledBack, RollbackFailed:
		return afterFailure(s, f), nil
	}
	return s, fmt.Errorf("job %s has an unknown state %q", j.ID, j.State)
}

// StartFailed is the step after the job's command (or its rollback)
// could not be started: a failure of the command (of the rollback).
func StartFailed(j Job, f Facts, err error) Step {
	s := Step{Job: j}
	if j.State == RollingBack {
		s.Job.State = RollbackFailed
	} else {
		s.Job.State = Failed
	}
	s.Job.Message, s.Job.FailedBoot = err.Error(), f.Boot
	s = afterFailure(s, f)
	s.Save = true
	return s
}

// afterFailure is a failed job's step: run its rollback, wait to run it
// again, or hold the node.
func afterFailure(s Step, f Facts) Step {
	j := &s.Job
	switch {
	case j.Held():
		s.Message, s.Failed = held(*j, f), true
		return s
	case j.State == Failed && len(j.Rollback) > 0:
		j.State, j.RollbackExitCode, j.RollbackLastLines = RollingBack, nil, nil
		s.Save, s.Do = true, Start
		s.Message = j.Summary()
		s.Log, s.Warn = "job failed: running its rollback", true
		return s
	}
	j.RetryAt = f.Now.Add(min(j.Backoff<<min(j.attempts()-1, 16), MaxBackoff)).UTC()
	j.State = Retrying
	s.Save, s.WakeAt = true, j.RetryAt
	s.Message = j.Summary()
	s.Log, s.Warn = "job failed: running it again at "+j.RetryAt.Format(time.RFC3339), true
	return s
}

func start(s Step, f Facts, log string) Step {
	j := &s.Job
	j.Runs++
	j.Attempts = j.attempts()
	j.State, j.Started, j.ExitCode, j.LastLines, j.Message, j.Boot = Running, f.Now.UTC(), nil, nil, "", ""
	s.Save, s.Do = true, Start
	s.Message, s.Log = j.Summary(), log
	return s
}

// failed ends a job that neither a rollback nor a retry can help.
func failed(s Step, f Facts, why string) Step {
	s.Job.State, s.Job.Message, s.Job.Final, s.Job.FailedBoot = Failed, why, true, f.Boot
	s.Save, s.Failed = true, true
	s.Message = s.Job.Summary()
	return s
}

// MaxBackoff bounds the wait before a retry, however often it doubled.
const MaxBackoff = 24 * time.Hour

// held is a failed job's line: the node keeps the lock and the cordon.
func held(j Job, f Facts) string {
	return j.Summary() + "; the lock and the cordon are held (journalctl -u " + f.Unit + ")"
}

// Summary is the one line for the node record.
func (j *Job) Summary() string {
	s := fmt.Sprintf("job %s (run %d): %s", j.ID, j.Runs, j.State)
	if j.ExitCode != nil {
		s += fmt.Sprintf(", exit %d", *j.ExitCode)
	}
	if j.Message != "" {
		s += ": " + j.Message
	} else if n := len(j.LastLines); n > 0 && j.afterFailure() {
		s += ": " + j.LastLines[n-1]
	}
	switch {
	case j.RollbackExitCode != nil && *j.RollbackExitCode != 0:
		s += fmt.Sprintf("; rollback exit %d", *j.RollbackExitCode)
		if n := len(j.RollbackLastLines); n > 0 {
			s += ": " + j.RollbackLastLines[n-1]
		}
	case j.State == Retrying:
		s += fmt.Sprintf("; attempt %d of %d at %s", j.attempts()+1, j.Retries+1, j.RetryAt.UTC().Format(time.RFC3339))
	}
	return s
}

// afterFailure: the command failed, and the job is held, rolls back or
// waits to run again.
func (j *Job) afterFailure() bool {
	switch j.State {
	case Failed, RollingBack, RolledBack, RollbackFailed, Retrying:
		return true
	}
	return false
}
