package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
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

// requestReboot asks for a maintenance whose job is the reboot: a managed
// job that runs nothing (/bin/true) and reboots, as every job does when a
// reboot is pending after it, keeping the lock; it runs again after the
// boot and ends there. At most once per boot, and not again in a boot
// where the last one failed or was withdrawn (an admin removed its
// request): a host whose need a reboot does not take away is not rebooted
// over and over. An agent that cannot reach logind asks for nothing: it
// could drain the node but not reboot it.
func (a *Agent) requestReboot(ctx context.Context, o decide.Observed, node *corev1.Node) (bool, error) {
	if o.Request != nil {
		return false, nil
	}
	if err := a.dropOrphanRebootJob(); err != nil {
		return false, err
	}
	p := a.decision.Policy
	if p.Err != nil || !p.Spec.Triggers.RebootRequired {
		return false, nil
	}
	boot := bootID()
	now := a.now()
	if !o.RebootPending && now.Before(a.rebootTrigger.checkAt) {
		return false, nil
	}
	a.rebootTrigger.checkAt = now.Add(rebootCheckEvery)
	id := RebootJobPrefix + boot[:min(12, len(boot))]
	if _, err := a.jobs.store.Get(id); err == nil {
		return false, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return false, permanent(err)
	}
	if last, err := a.lastRebootJob(); err != nil {
		return false, permanent(err)
	} else if last != nil && last.State != jobs.Succeeded && last.FailedBoot == boot {
		return false, nil
	}
	need, why, err := a.rebootTrigger.check.Required(ctx)
	if err != nil {
		a.log.Warn("cannot tell whether the host needs a reboot", "err", err)
		return false, nil
	}
	if !need {
		return false, nil
	}
	if a.host.reboot == nil {
		a.log.Warn("the host needs a reboot, but logind cannot be reached to make it: not asking for one", "why", why)
		return false, nil
	}
	job := &jobs.Job{ID: id, Command: []string{"/bin/true"}, Reboot: jobs.RebootAuto, Created: now.UTC(), State: jobs.Pending}
	if err := a.jobs.store.Create(job); errors.Is(err, jobs.ErrBusy) {
		return false, nil // kustodian run, between its job and its request
	} else if err != nil {
		return false, permanent(err)
	}
	reason := "reboot required: " + why
	if _, err := a.files.CreateRequest(reason + "\n"); err != nil {
		if derr := a.jobs.store.Discard(id); derr != nil {
			return false, permanent(fmt.Errorf("%w (and job %s could not be removed: %v)", err, id, derr))
		}
		if errors.Is(err, hostfiles.ErrRequested) {
			return false, nil // a maintenance script asked first
		}
		return false, permanent(err)
	}
	a.log.Info("the host needs a reboot: maintenance requested", "reason", reason, "policy", p.Name, "job", id)
	if node != nil {
		a.applyEffects(ctx, node.UID, nil, decide.Said(ReasonRebootRequested, false, fmt.Sprintf("asked for a reboot (policy %s, triggers.rebootRequired): %s", p.Name, why)))
	}
	a.poke()
	return true, nil
}

// dropOrphanRebootJob ends a reboot job that is still current at Idle: its
// request went before it ran (an admin withdrew it while the node waited,
// or the agent died between the job and its request). It is recorded as
// failed in this boot, so that it is not asked for again until the next,
// and is no longer current (it would run as the job of the next request).
func (a *Agent) dropOrphanRebootJob() error {
	cur, err := a.jobs.store.Current()
	if err != nil || cur == nil || !strings.HasPrefix(cur.ID, RebootJobPrefix) {
		return err
	}
	cur.State, cur.Final, cur.FailedBoot = jobs.Failed, true, bootID()
	cur.Message = "withdrawn: its request was removed before it ran"
	if err := a.jobs.store.Save(cur); err != nil {
		return permanent(err)
	}
	a.log.Info("the reboot asked for was withdrawn; not asking again in this boot", "job", cur.ID)
	return a.jobs.store.ClearCurrent()
}

// lastRebootJob is the newest reboot job this agent made; nil: none.
func (a *Agent) lastRebootJob() (*jobs.Job, error) {
	entries, err := os.ReadDir(a.jobs.store.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var last *jobs.Job
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !strings.HasPrefix(id, RebootJobPrefix) {
			continue
		}
		j, err := a.jobs.store.Get(id)
		if err != nil {
			return nil, err
		}
		if last == nil || j.Created.After(last.Created) {
			last = j
		}
	}
	return last, nil
}
