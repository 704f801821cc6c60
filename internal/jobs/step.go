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
	case Running:
		if f.Alive {
			s.Message = j.Summary()
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
			case j.Runs >= MaxRuns:
				return failed(s, f, fmt.Sprintf("a reboot is still pending after %d runs", j.Runs)), nil
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
	case Failed:
		s.Message, s.Failed = held(j, f), true
		return s, nil
	}
	return s, fmt.Errorf("job %s has an unknown state %q", j.ID, j.State)
}

// StartFailed is the step after the job's command could not be started.
func StartFailed(j Job, f Facts, err error) Step {
	return failed(Step{Job: j}, f, err.Error())
}

func start(s Step, f Facts, log string) Step {
	j := &s.Job
	j.Runs++
	j.State, j.Started, j.ExitCode, j.LastLines, j.Message, j.Boot = Running, f.Now.UTC(), nil, nil, "", ""
	s.Save, s.Do = true, Start
	s.Message, s.Log = j.Summary(), log
	return s
}

func failed(s Step, f Facts, why string) Step {
	s.Job.State, s.Job.Message = Failed, why
	s.Save, s.Failed = true, true
	s.Message = s.Job.Summary()
	return s
}

// held is a failed job's line: the node keeps the lock and the cordon.
func held(j Job, f Facts) string {
	return j.Summary() + "; the lock and the cordon are held (journalctl -u " + f.Unit + ")"
}
