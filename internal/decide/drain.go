package decide

import "fmt"

// DrainFacts are what the next step of a Draining node depends on.
type DrainFacts struct {
	// NodeExists: this host's Node exists.
	NodeExists bool
	// KuredRefused says why Kured's lock could not be held for this node;
	// "" when it is held, or Kured is not in use.
	KuredRefused string
	// CordonedByUs: Kustodian's cordon is on the node already.
	CordonedByUs bool
	// Overbooked says why the policy's maxUnavailable is reached with this
	// node; "" when it is not, or was not checked (checkOverbooking).
	Overbooked string
	// Request is the current request's ID.
	Request string
	// Drain is the drain this agent runs or ran; nil when none.
	Drain *DrainRun
	// ReleaseOnTimeout: drain.onTimeout is release (a drain that timed out
	// gives the node back and queues again) rather than hold.
	ReleaseOnTimeout bool
	// Quarantine: the policy quarantines a node whose drain timed out
	// (spec.drain.quarantine).
	Quarantine bool
	// QuarantineFull says why no node more may be quarantined (the
	// policy's cap is reached); "" when there is room, or it was not
	// checked (checkQuarantine).
	QuarantineFull string
}

// DrainRun is a drain as far as it went.
type DrainRun struct {
	Request  string // the request it drains for
	Done     bool
	Err      error // when Done: why it failed; nil when it succeeded
	TimedOut bool  // when Done with Err: it ran out of time
	Progress string
	// Stuck: when TimedOut, the pods that would not go.
	Stuck []string
	// Disrupted: when Done, the controllers whose pods it evicted.
	Disrupted []string
}

// DrainDo is what a Draining node does.
type DrainDo int

const (
	// DrainNoNode: the Node is gone; keep the lock (the host is alive and
	// the Node may come back) and try again.
	DrainNoNode DrainDo = iota
	// DrainGiveBack: give the node back (uncordon, release) without
	// draining: Kured holds its lock, or the policy is overbooked.
	DrainGiveBack
	// DrainStart: cordon and start the drain (stopping one for an older
	// request first).
	DrainStart
	// DrainWait: cordon (again, if someone uncordoned it) and report the
	// drain's progress.
	DrainWait
	// DrainRequeue: the drain timed out and the policy says release: give
	// the node back and queue again at the back (the record goes).
	DrainRequeue
	// DrainHold: the drain failed; keep the lock and the cordon (Failed)
	// until an admin acts.
	DrainHold
	// DrainDrained: drained; tell the script to go on.
	DrainDrained
	// DrainQuarantine: the drain timed out and the policy quarantines:
	// give the locks back, keep the cordon, mark the node (Failed for this
	// request, as after an admin's release).
	DrainQuarantine
)

// DrainStep is a Draining node's next step.
type DrainStep struct {
	Do DrainDo
	// Message is the record's line, Status the host's (systemd's STATUS:
	// the drain's progress; "" for Message), Why the reason for the log
	// and Events.
	Message string
	Status  string
	Why     string
	// Publish: write the record (Draining, Message) before acting.
	Publish bool
	// Effects: what the step makes known (besides what its record's
	// change of state makes known).
	Effects []Effect
}

// checkOverbooking says whether the overbooking check must be made (a
// fresh read of the policy's locks and Nodes) before DrainNext: only
// before this node's cordon and drain, which once begun are not undone for
// it.
func checkOverbooking(f DrainFacts) bool {
	return f.NodeExists && f.KuredRefused == "" && !f.CordonedByUs && f.Drain == nil
}

// checkQuarantine says whether the quarantined nodes must be counted (a
// fresh read of the Nodes) before DrainNext: only when the drain timed out
// and the policy quarantines.
func checkQuarantine(f DrainFacts) bool {
	return f.Quarantine && f.Drain != nil && f.Drain.Done && f.Drain.TimedOut && f.Drain.Request == f.Request
}

// DrainLookups are what a Draining node's decision looks up before it
// decides: nil, not yet.
type DrainLookups struct {
	// KuredRefused says why Kured's lock could not be held for this node
	// ("" when it is held, or Kured is not in use).
	KuredRefused *string
	// QuarantineFull and Overbooked: see DrainFacts.
	QuarantineFull *string
	Overbooked     *string
}

// draining decides for a Draining node: what it knows of itself, then
// what it must look up (Kured's lock first, then the quarantined nodes
// and the policy's maxUnavailable, each only when it matters), then the
// step.
func draining(s Snapshot, o Observed, d *Decision) {
	f := DrainFacts{NodeExists: s.Self != nil, CordonedByUs: o.CordonedByUs, Request: o.Request.ID, Drain: s.Drain,
		ReleaseOnTimeout: s.Params.ReleaseOnTimeout, Quarantine: d.Policy.Spec.Drain.Quarantine != nil}
	lk := s.DrainLookups
	if f.NodeExists {
		if lk.KuredRefused == nil {
			d.Need.Kured = true
			return
		}
		f.KuredRefused = *lk.KuredRefused
	}
	if checkQuarantine(f) {
		if lk.QuarantineFull == nil {
			d.Need.Quarantine = true
		} else {
			f.QuarantineFull = *lk.QuarantineFull
		}
	}
	if checkOverbooking(f) {
		if lk.Overbooked == nil {
			d.Need.Overbooking = true
		} else {
			f.Overbooked = *lk.Overbooked
		}
	}
	if d.Need.Empty() {
		d.Drain = DrainNext(f)
	}
}

// DrainNext decides a Draining node's next step. There is no drain without
// Kured's lock: Kured took it (between this node's grant and now, or while
// the agent was down), so the node is given back to wait for Kured's
// reboot. Heads of two groups may have found room under maxUnavailable in
// the same instant: the later one gives its lock back, still Waiting in its
// record (it never left the cluster).
func DrainNext(f DrainFacts) DrainStep {
	switch {
	case !f.NodeExists:
		return DrainStep{Do: DrainNoNode, Why: "this host's Node does not exist, but this host holds the lock; waiting for the Node to return"}
	case f.KuredRefused != "":
		return DrainStep{Do: DrainGiveBack, Publish: true, Message: "giving the node back: " + f.KuredRefused,
			Why: "Kured's lock is taken; giving the node back and waiting: " + f.KuredRefused}
	case f.Overbooked != "":
		return DrainStep{Do: DrainGiveBack, Why: "giving the lock back: the policy's maxUnavailable is reached: " + f.Overbooked}
	case f.Drain == nil || f.Drain.Request != f.Request:
		return DrainStep{Do: DrainStart, Publish: true, Message: "cordoned; draining", Status: "draining"}
	case !f.Drain.Done:
		progress := f.Drain.Progress
		if progress == "" {
			progress = "draining"
		}
		return DrainStep{Do: DrainWait, Publish: true, Message: "cordoned; " + progress, Status: progress}
	case f.Drain.Err == nil:
		return DrainStep{Do: DrainDrained, Effects: Said(ReasonDrained, false, "node cordoned and drained")}
	case f.Drain.TimedOut && f.Quarantine && f.QuarantineFull == "":
		return DrainStep{Do: DrainQuarantine, Why: "drain failed: " + f.Drain.Err.Error() + "; the node is quarantined: it stays cordoned, its lock goes to the next node"}
	case f.Drain.TimedOut && f.Quarantine:
		return DrainStep{Do: DrainHold, Why: fmt.Sprintf("drain failed: %v; not quarantined: %s, so the lock and the cordon are held and the rollout stops here (release a quarantined node, or this one)", f.Drain.Err, f.QuarantineFull)}
	case f.Drain.TimedOut && f.ReleaseOnTimeout:
		why := "drain failed: " + f.Drain.Err.Error() + "; the node is given back and queues again"
		// Not Failed, but a maintenance that did not happen: said as one.
		return DrainStep{Do: DrainRequeue, Why: why, Effects: Failure(why)}
	}
	return DrainStep{Do: DrainHold, Why: fmt.Sprintf("drain failed: %v; the lock and the cordon are held (fix the cause, then restart the agent to drain again, or release the lock)", f.Drain.Err)}
}
