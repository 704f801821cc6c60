package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/hostfiles"
	"github.com/kustodian/kustodian/internal/jobs"
)

// rebootTrigger is what the agent keeps to ask for the reboots its host
// needs (a policy's triggers.rebootRequired).
type rebootTrigger struct {
	check hostfiles.RebootCheck
	// checkAt: the next time a command may be asked (an agent that stays
	// is Idle at every heartbeat).
	checkAt time.Time
}

// rebootCheckEvery bounds how often an agent that stays asks the host's
// command whether it needs a reboot; the sentinel is looked at every time.
const rebootCheckEvery = time.Minute

// RebootJobPrefix begins the ID of the managed job of a reboot the agent
// asked for; the boot it was asked in follows.
const RebootJobPrefix = "reboot-required-"

// ReasonRebootRequested is the Event of a reboot the agent asked for.
const ReasonRebootRequested = "RebootRequested"

// idle is the Idle state: clean up, then ask for the reboot the host
// needs, where the node's policy lets the agent do so. asked: a request
// was made, which the agent goes on with.
func (a *Agent) idle(ctx context.Context, o decide.Observed, node *corev1.Node) (asked bool, err error) {
	if err := a.cleanUp(ctx, node); err != nil {
		return false, err
	}
	return a.requestReboot(ctx, o, node)
}

// requestReboot asks for a maintenance whose job is the reboot: a managed
// job that runs nothing (/bin/true) and reboots, as every job does when a
// reboot is pending after it, keeping the lock; it runs again after the
// boot and ends there. Once per boot: a request withdrawn by an admin, or a
// reboot that did not take the need away, is not asked for again until
// the host boots again.
func (a *Agent) requestReboot(ctx context.Context, o decide.Observed, node *corev1.Node) (bool, error) {
	p := a.decision.Policy
	if p.Err != nil || !p.Spec.Triggers.RebootRequired || o.Request != nil {
		return false, nil
	}
	now := a.now()
	if !o.RebootPending && now.Before(a.rebootTrigger.checkAt) {
		return false, nil
	}
	a.rebootTrigger.checkAt = now.Add(rebootCheckEvery)
	boot := bootID()
	id := RebootJobPrefix + boot[:min(12, len(boot))]
	if _, err := a.jobs.Get(id); err == nil {
		return false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, permanent(err)
	}
	need, why, err := a.rebootTrigger.check.Required(ctx)
	if err != nil {
		a.log.Warn("cannot tell whether the host needs a reboot", "err", err)
		return false, nil
	}
	if !need {
		return false, nil
	}
	job := &jobs.Job{ID: id, Command: []string{"/bin/true"}, Reboot: jobs.RebootAuto, Created: now.UTC(), State: jobs.Pending}
	if err := a.jobs.Create(job); err != nil {
		return false, permanent(err)
	}
	reason := "reboot required: " + why
	if _, err := a.files.CreateRequest(reason + "\n"); err != nil {
		if derr := a.jobs.Discard(id); derr != nil {
			return false, permanent(fmt.Errorf("%w (and job %s could not be removed: %v)", err, id, derr))
		}
		if errors.Is(err, hostfiles.ErrRequested) {
			return false, nil // a maintenance script asked first
		}
		return false, permanent(err)
	}
	a.log.Info("the host needs a reboot: maintenance requested", "reason", reason, "policy", p.Name, "job", id)
	if node != nil {
		a.event(ctx, node.UID, corev1.EventTypeNormal, ReasonRebootRequested, fmt.Sprintf("asked for a reboot (policy %s, triggers.rebootRequired): %s", p.Name, why))
	}
	a.poke()
	return true, nil
}

// rebootPendingAfter says whether a reboot is pending after job j: the
// sentinel, or, once the job succeeded, the host's command or
// needs-restarting (which leave no file).
func (a *Agent) rebootPendingAfter(ctx context.Context, j *jobs.Job, sentinel bool) (bool, error) {
	c := a.rebootTrigger.check
	if sentinel || j.State != jobs.Succeeded || (c.Command == "" && c.NeedsRestarting == "") {
		return sentinel, nil
	}
	need, _, err := c.Required(ctx)
	return need, err
}
