package decide

import (
	"fmt"
	"strings"

	"github.com/kustodian/kustodian/internal/jobs"
	"github.com/kustodian/kustodian/internal/lock"
)

// Act is one thing the agent does to carry a decision out. The acts are
// grouped by the seam they go through: the host and the agent's own
// memory, the locks (Kured's among them), the node's record, its Node, and
// what the step makes known.
type Act int

const (
	// The host, and what the agent keeps in memory.

	// ActStopDrain ends the drain that runs, if any.
	ActStopDrain Act = iota + 1
	// ActInhibit holds logind's block inhibitor in Step.State Draining and
	// Completing, and lets it go in any other.
	ActInhibit
	ActRemoveInProgress
	// ActCreateInProgress tells the script to go ahead.
	ActCreateInProgress
	// ActClearJob ends the current managed job: a job that failed is
	// history now, not the job of the next request.
	ActClearJob
	// ActEscalation makes the running drain follow the policy's
	// spec.drain.escalate as it is now.
	ActEscalation
	// ActStartDrain starts draining for the request, under the policy's
	// escalation rules.
	ActStartDrain
	// ActForgetDrain forgets the drain that ended, once acted on.
	ActForgetDrain
	// ActHoldFailure remembers that the request's drain failed
	// (Step.Message why): it is not drained again until the agent
	// restarts.
	ActHoldFailure
	// ActQuarantined remembers the request this node was quarantined for.
	ActQuarantined
	// ActJob carries out the managed job's step (Step.Job: save it, then
	// start it, reboot or end it) and publishes what it says.
	ActJob
	// ActForget forgets, at Idle, the failures and the escalation of the
	// cycle that ended, and reports Idle (Step.State: the state it came
	// from; Step.Succeeded: a maintenance that succeeded ended).
	ActForget
	// ActAskReboot asks for the reboot the host needs, where the node's
	// policy lets the agent.
	ActAskReboot
	// ActLog logs Step.Message at Step.Level, with Step.Pods.
	ActLog
	// ActAbort ends the step with Step.Err, or Step.Message as its error.
	ActAbort
	// ActPoke decides again at once.
	ActPoke

	// The locks.

	// ActRenew renews Step.Locks (once a heartbeat; with a TTL).
	ActRenew
	// ActTake tries Step.Locks in turn, and holds Kured's lock with the one
	// it takes (or gives it back).
	ActTake
	ActReleaseKured
	// ActReleaseAll releases Kured's lock, then every lock this node holds,
	// naming the next nodes of their queues first (Step.Locks: those it
	// held when it decided, which the Events name).
	ActReleaseAll
	// ActLeaveQueues makes again the summaries that still name this node.
	ActLeaveQueues
	// ActRenominate makes the group's queue summary again (Step.Message
	// why).
	ActRenominate
	// ActTouch renews the group's queue summary.
	ActTouch
	// ActSetDisrupted writes on Step.Locks the controllers the drain
	// disrupted.
	ActSetDisrupted
	// ActConfirmHeld asks the API server whether this node still holds
	// one of Step.Locks.
	ActConfirmHeld

	// The node's record.

	// ActPublish writes the record (Step.State, Step.Message; Step.Status
	// the host's line, "" for the message), with its transition's effects,
	// the node's state label and conditions.
	ActPublish
	ActRemoveRecord

	// The Node.

	// ActProtect marks the node for the cluster autoscaler not to remove.
	ActProtect
	ActCordon
	// ActUncordon uncordons the node (unless an admin had cordoned it),
	// read afresh, and takes the autoscaler's mark off.
	ActUncordon
	// ActMarkQuarantine marks the node quarantined by its policy.
	ActMarkQuarantine
	ActUnquarantine
	// ActShowState writes the node's state label and conditions.
	ActShowState

	// ActTell makes Step.Effects known, about the record Step.About.
	ActTell
)

// Level is how loud an ActLog is.
type Level int

const (
	LevelInfo Level = iota
	LevelWarn
	LevelError
)

// Step is one act of a plan.
type Step struct {
	Do Act
	// State, Message, Status: ActPublish, ActShowState, ActInhibit;
	// Message alone: ActLog, ActAbort, ActHoldFailure, ActRenominate.
	State   lock.State
	Message string
	Status  string
	Level   Level
	Pods    []string
	// Locks: ActRenew, ActTake, ActSetDisrupted, ActConfirmHeld,
	// ActReleaseAll.
	Locks []string
	// Controllers: ActSetDisrupted.
	Controllers []string
	// Effects about About (nil: none): ActTell.
	Effects []Effect
	About   *lock.Record
	// Succeeded: ActForget.
	Succeeded bool
	// NoneTaken: only when the ActTake before took no lock.
	NoneTaken bool
	// Job: ActJob.
	Job *JobStep
	// Err: ActAbort.
	Err error
	// Claim: ActRenominate first writes the summary's Lease as this node
	// saw it (lockapi.TouchSummary) and makes nothing more when another
	// node wrote it meanwhile: of the nodes that find a head gone, one
	// lists the records, and the others see its write and wait again.
	Claim bool
}

// JobStep is a managed job's next step (jobs.Next), with the facts it was
// decided on (a start that fails is decided again from them:
// jobs.StartFailed).
type JobStep struct {
	Step  jobs.Step
	Facts jobs.Facts
}

// plan fills d.Steps: what the agent does, in order, to carry the
// decision out.
func plan(s Snapshot, o Observed, d *Decision) {
	var p []Step
	add := func(steps ...Step) { p = append(p, steps...) }
	if d.State != lock.Draining {
		add(Step{Do: ActStopDrain})
	}
	if s.Params.TTL != 0 && len(o.HeldLocks) > 0 {
		add(Step{Do: ActRenew, Locks: o.HeldLocks})
	}
	add(Step{Do: ActInhibit, State: d.State})
	switch d.State {
	case lock.Waiting:
		p = waitingSteps(s, o, *d, p)
	case lock.Failed:
		if o.Released() {
			// An admin broke this node's lock: the script must not go
			// on, the node stays cordoned, and this request is not
			// queued again.
			add(Step{Do: ActReleaseKured})
			if o.InProgress {
				add(Step{Do: ActRemoveInProgress})
			}
		}
		add(Step{Do: ActPublish, State: lock.Failed, Message: d.Message})
	case lock.Completing:
		add(Step{Do: ActPublish, State: lock.Completing, Message: d.Message},
			Step{Do: ActRemoveInProgress}, Step{Do: ActClearJob})
		p = giveBack(s, o, p)
		p = append(p, Step{Do: ActPoke}) // on to Idle
	case lock.Draining:
		add(Step{Do: ActEscalation})
		p = drainSteps(s, o, d.Drain, p)
	case lock.InMaintenance:
		p = maintenanceSteps(s, p)
	case lock.Idle:
		p = idleSteps(s, p)
	}
	d.Steps = p
}

// idleSteps clean up what a finished cycle may have left (Kured's entry,
// the quarantine mark, the state label, the record, the node's place in a
// queue), then ask for the reboot the host needs.
func idleSteps(s Snapshot, p []Step) []Step {
	// An entry in Kured's lock left by a crash while giving back would
	// hold every node back.
	p = append(p, Step{Do: ActReleaseKured})
	if s.Self != nil {
		p = append(p, Step{Do: ActUnquarantine}, Step{Do: ActShowState, State: lock.Idle})
	}
	from, succeeded := lock.Idle, false
	if prev := s.Own; prev != nil {
		from, succeeded = prev.State, prev.State == lock.Completing && !prev.AfterFailure
		p = append(p, Step{Do: ActRemoveRecord}, Step{Do: ActTell, About: prev, Effects: Transition(prev.State, lock.Idle, *prev)})
	}
	// A request withdrawn while this node was named in a queue: the
	// summary is made again without it, so that its turn passes at once.
	if s.namedInAQueue() {
		p = append(p, Step{Do: ActLeaveQueues})
	}
	p = append(p, Step{Do: ActForget, State: from, Succeeded: succeeded})
	if s.Request == nil {
		p = append(p, Step{Do: ActAskReboot})
	}
	return p
}

// waitingSteps publish the node's place and the gate that holds it, and
// take a lock when the decision says which to try.
func waitingSteps(s Snapshot, o Observed, d Decision, p []Step) []Step {
	if o.InProgress {
		// Left from an interrupted cycle: it must not tell a script to go
		// ahead while this node does not hold the lock.
		p = append(p, Step{Do: ActRemoveInProgress})
	}
	p = append(p, Step{Do: ActTell, About: s.Own, Effects: d.Effects})
	publish := Step{Do: ActPublish, State: lock.Waiting, Message: d.Message}
	if len(d.Try) == 0 {
		p = append(p, publish)
		switch {
		case d.Renominate != "":
			p = append(p, Step{Do: ActRenominate, Message: d.Renominate, Claim: d.Takeover})
		case d.Touch:
			p = append(p, Step{Do: ActTouch})
		}
		return p
	}
	// Others must see this node eligible before it takes a slot, or the
	// node behind it could take the slot meant for it.
	if r := s.Own; r == nil || r.State != lock.Waiting || r.OwnGateClosed() {
		p = append(p, publish)
	}
	again := publish
	again.NoneTaken = true
	return append(p, Step{Do: ActTake, Locks: d.Try}, again)
}

// drainSteps carry out a Draining node's step.
func drainSteps(s Snapshot, o Observed, step DrainStep, p []Step) []Step {
	add := func(steps ...Step) { p = append(p, steps...) }
	switch step.Do {
	case DrainNoNode:
		add(Step{Do: ActAbort, Message: step.Why})
		return p
	case DrainGiveBack:
		add(Step{Do: ActStopDrain}, Step{Do: ActLog, Level: LevelWarn, Message: step.Why})
		if step.Publish {
			add(Step{Do: ActPublish, State: lock.Draining, Message: step.Message, Status: step.Status})
		}
		return giveBack(s, o, p)
	case DrainRequeue:
		var about *lock.Record
		if s.Own != nil {
			failed := *s.Own
			failed.Message = step.Why
			about = &failed
		}
		add(Step{Do: ActForgetDrain}, Step{Do: ActTell, About: about, Effects: step.Effects},
			Step{Do: ActLog, Level: LevelWarn, Message: step.Why})
		p = giveBack(s, o, p)
		return append(p, Step{Do: ActRemoveRecord})
	case DrainQuarantine:
		var stuck []string
		if s.Drain != nil {
			stuck = s.Drain.Stuck
		}
		msg := "quarantined: the drain timed out; " + podList(stuck) + " would not go; the node stays cordoned and its lock went to the next node (remove " +
			s.Params.RequestFile + " once the pods are dealt with; a new request starts over)"
		add(Step{Do: ActMarkQuarantine}, Step{Do: ActForgetDrain}, Step{Do: ActLog, Level: LevelWarn, Message: step.Why, Pods: stuck},
			Step{Do: ActQuarantined}, Step{Do: ActPublish, State: lock.Failed, Message: msg},
			Step{Do: ActTell, Effects: Said(ReasonQuarantined, true, msg)})
		return releaseAll(o, p)
	case DrainHold:
		add(Step{Do: ActForgetDrain}, Step{Do: ActLog, Level: LevelError, Message: step.Why},
			Step{Do: ActHoldFailure, Message: step.Why}, Step{Do: ActPublish, State: lock.Failed, Message: step.Why})
		return p
	}
	// Start, Wait and Drained: the cordon stays on (put back if someone
	// took it off).
	if s.Policy.Spec.Autoscaler.Protect {
		add(Step{Do: ActProtect})
	}
	add(Step{Do: ActCordon})
	switch step.Do {
	case DrainStart:
		add(Step{Do: ActStopDrain}, // a drain for an older request
			Step{Do: ActPublish, State: lock.Draining, Message: step.Message, Status: step.Status}, Step{Do: ActStartDrain})
		return p
	case DrainWait:
		add(Step{Do: ActPublish, State: lock.Draining, Message: step.Message, Status: step.Status})
		return p
	}
	// Drained: tell the script to go ahead. The in-progress file is
	// created only now that the node is cordoned and every pod that must
	// leave has left, and only while the API server, not the cache, says
	// this node holds its lock: a lock can go while a drain runs (with
	// this host's Node, which owns it), and the cache of an agent whose
	// token died with its Node no longer changes.
	add(Step{Do: ActForgetDrain})
	if s.Drain != nil && len(s.Drain.Disrupted) > 0 {
		// The group's next node waits for them (health.workloadsRecovered);
		// a drain that evicted nothing (a second drain after a restart)
		// leaves the list as it was.
		add(Step{Do: ActSetDisrupted, Locks: o.HeldLocks, Controllers: s.Drain.Disrupted})
	}
	add(Step{Do: ActConfirmHeld, Locks: o.HeldLocks}, Step{Do: ActCreateInProgress}, Step{Do: ActTell, Effects: step.Effects})
	return maintenanceSteps(s, p)
}

// maintenanceSteps keep the node cordoned (someone may have uncordoned it
// mid-maintenance), move the maintenance's managed job on, and publish
// where it stands.
func maintenanceSteps(s Snapshot, p []Step) []Step {
	if s.Self != nil && !s.Self.Cordoned {
		p = append(p, Step{Do: ActCordon})
	}
	if s.Job != nil && s.Job.Err != nil {
		return append(p, Step{Do: ActAbort, Err: s.Job.Err})
	}
	if s.Job == nil || s.Job.Job == nil {
		return append(p, Step{Do: ActPublish, State: lock.InMaintenance, Message: "in maintenance: waiting for the script to remove " + s.Params.RequestFile})
	}
	step, err := jobs.Next(*s.Job.Job, s.Job.Facts)
	if err != nil {
		return append(p, Step{Do: ActAbort, Err: err})
	}
	return append(p, Step{Do: ActJob, Job: &JobStep{Step: step, Facts: s.Job.Facts}})
}

// giveBack uncordons the node (unless an admin had cordoned it), then
// releases Kured's lock and this node's locks: the next node then finds
// Kured's lock free by the time it finds a slot free, and a crash in
// between leaves a lock held, which the next start gives back.
func giveBack(s Snapshot, o Observed, p []Step) []Step {
	if s.Self != nil {
		p = append(p, Step{Do: ActUncordon})
	}
	return releaseAll(o, p)
}

// releaseAll releases Kured's lock and this node's locks, and says so.
func releaseAll(o Observed, p []Step) []Step {
	p = append(p, Step{Do: ActReleaseAll, Locks: o.HeldLocks})
	var said []Effect
	for _, name := range o.HeldLocks {
		said = append(said, Said(ReasonLockReleased, false, "released lock "+name)...)
	}
	if len(said) > 0 {
		p = append(p, Step{Do: ActTell, Effects: said})
	}
	return p
}

// podList names the pods a drain that timed out left.
func podList(pods []string) string {
	switch {
	case len(pods) == 0:
		return "no pod named"
	case len(pods) == 1:
		return "pod " + pods[0]
	case len(pods) > 5:
		return fmt.Sprintf("pods %s and %d more", strings.Join(pods[:5], ", "), len(pods)-5)
	}
	return "pods " + strings.Join(pods, ", ")
}

// namedInAQueue reports whether a queue summary (as read) names this node.
func (s Snapshot) namedInAQueue() bool {
	for _, q := range s.Queues {
		if q.Err == nil && q.Summary.Index(s.Node) >= 0 {
			return true
		}
	}
	return false
}
