package decide

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/jobs"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/policy"
)

// actNames spells the acts the tables below expect; a new act must be
// named here to be tested.
var actNames = map[Act]string{
	ActStopDrain: "stop-drain", ActInhibit: "inhibit", ActRemoveInProgress: "rm-in-progress", ActCreateInProgress: "create-in-progress",
	ActClearJob: "clear-job", ActEscalation: "escalation", ActStartDrain: "start-drain", ActForgetDrain: "forget-drain",
	ActHoldFailure: "hold-failure", ActQuarantined: "quarantined", ActJob: "job", ActForget: "forget",
	ActAskReboot: "ask-reboot", ActLog: "log", ActAbort: "abort", ActPoke: "poke",
	ActRenew: "renew", ActTake: "take", ActReleaseKured: "release-kured", ActReleaseAll: "release-all", ActLeaveQueues: "leave-queues",
	ActRenominate: "renominate", ActTouch: "touch", ActSetDisrupted: "set-disrupted", ActConfirmHeld: "confirm-held",
	ActPublish: "publish", ActRemoveRecord: "rm-record",
	ActProtect: "protect", ActCordon: "cordon", ActUncordon: "uncordon", ActMarkQuarantine: "mark-quarantine",
	ActUnquarantine: "unquarantine", ActShowState: "show-state", ActTell: "tell",
}

func acts(steps []Step) string {
	var out []string
	for _, s := range steps {
		n, ok := actNames[s.Do]
		if !ok {
			n = "?"
		}
		if s.Do == ActPublish || s.Do == ActShowState {
			n += "(" + string(s.State) + ")"
		}
		if s.NoneTaken {
			n += "-if-none-taken"
		}
		if s.Claim {
			n += "(claimed)"
		}
		out = append(out, n)
	}
	return strings.Join(out, " ")
}

// TestPlanOfEveryState: what the agent does, in order, in each state, as
// a reader of the state machine would list it.
func TestPlanOfEveryState(t *testing.T) {
	str := func(s string) *string { return &s }
	holding := func(s *Snapshot) { s.Locks["lock-default-0"] = held("lock-default-0", "me") }
	drainingLookedUp := func(s *Snapshot) {
		holding(s)
		s.DrainLookups = DrainLookups{KuredRefused: str(""), Overbooked: str(""), QuarantineFull: str("")}
	}
	ownState := func(st lock.State) func(*Snapshot) {
		return func(s *Snapshot) { s.Own.State = st }
	}
	cases := []struct {
		name string
		mod  []func(*Snapshot)
		want string
	}{
		{"idle after a maintenance that succeeded", []func(*Snapshot){ownState(lock.Completing), func(s *Snapshot) { s.Request = nil }},
			"stop-drain inhibit release-kured unquarantine show-state(Idle) rm-record tell leave-queues forget ask-reboot"},
		{"idle, no Node, no record", []func(*Snapshot){func(s *Snapshot) { s.Request, s.Self, s.Own = nil, nil, nil }},
			"stop-drain inhibit release-kured leave-queues forget ask-reboot"},
		{"idle, named in no queue: no summary to make again", []func(*Snapshot){func(s *Snapshot) {
			s.Request, s.Self, s.Own = nil, nil, nil
			s.Queues[anyGroup] = QueueState{Summary: summary("a", "b"), Seen: t0}
		}}, "stop-drain inhibit release-kured forget ask-reboot"},
		{"waiting, a lock free", nil,
			"stop-drain inhibit tell take publish(Waiting)-if-none-taken"},
		{"waiting, first record", []func(*Snapshot){func(s *Snapshot) { s.Own = nil }},
			"stop-drain inhibit tell publish(Waiting) take publish(Waiting)-if-none-taken"},
		{"waiting, a script's file left", []func(*Snapshot){func(s *Snapshot) { s.InProgress = true }},
			"stop-drain inhibit rm-in-progress tell take publish(Waiting)-if-none-taken"},
		{"waiting, paused", []func(*Snapshot){func(s *Snapshot) { s.Paused = true }},
			"stop-drain inhibit tell publish(Waiting)"},
		{"draining starts", []func(*Snapshot){drainingLookedUp},
			"inhibit escalation cordon stop-drain publish(Draining) start-drain"},
		{"draining starts, the autoscaler kept off", []func(*Snapshot){drainingLookedUp,
			withPolicy(func(p *policy.Spec) { p.Autoscaler.Protect = true })},
			"inhibit escalation protect cordon stop-drain publish(Draining) start-drain"},
		{"drained", []func(*Snapshot){drainingLookedUp, func(s *Snapshot) {
			s.Self.Cordoned, s.Self.CordonedByUs = true, true
			s.Drain = &DrainRun{Request: "r1", Done: true, Disrupted: []string{"Deployment/a/b"}}
			s.Job = &JobLookup{}
		}}, "inhibit escalation cordon forget-drain set-disrupted confirm-held create-in-progress tell publish(InMaintenance)"},
		{"drained, nothing evicted, cordon not yet seen", []func(*Snapshot){drainingLookedUp, func(s *Snapshot) {
			s.Drain = &DrainRun{Request: "r1", Done: true}
			s.Job = &JobLookup{Job: &jobs.Job{ID: "j", Command: []string{"true"}, State: jobs.Pending}}
		}}, "inhibit escalation cordon forget-drain confirm-held create-in-progress tell cordon job"},
		{"drain timed out, quarantined", []func(*Snapshot){drainingLookedUp,
			withPolicy(func(p *policy.Spec) { p.Drain.Quarantine = &policy.Quarantine{} }), func(s *Snapshot) {
				s.Drain = &DrainRun{Request: "r1", Done: true, Err: errors.New("timed out"), TimedOut: true, Stuck: []string{"ns/web-0"}}
			}}, "inhibit escalation mark-quarantine forget-drain log quarantined publish(Failed) tell release-all tell"},
		{"drain timed out, onTimeout release", []func(*Snapshot){drainingLookedUp, func(s *Snapshot) {
			s.Params.ReleaseOnTimeout = true
			s.Drain = &DrainRun{Request: "r1", Done: true, Err: errors.New("timed out"), TimedOut: true}
		}}, "inhibit escalation forget-drain tell log uncordon release-all tell rm-record"},
		{"drain failed, held", []func(*Snapshot){drainingLookedUp, func(s *Snapshot) {
			s.Drain = &DrainRun{Request: "r1", Done: true, Err: errors.New("refused")}
		}}, "inhibit escalation forget-drain log hold-failure publish(Failed)"},
		{"Kured holds its lock", []func(*Snapshot){drainingLookedUp, func(s *Snapshot) { s.DrainLookups.KuredRefused = str("b reboots") }},
			"inhibit escalation stop-drain log publish(Draining) uncordon release-all tell"},
		{"Node gone while holding", []func(*Snapshot){holding, func(s *Snapshot) { s.Self = nil }},
			"inhibit escalation abort"},
		{"in maintenance, uncordoned by someone", []func(*Snapshot){holding, func(s *Snapshot) { s.InProgress, s.Job = true, &JobLookup{} }},
			"stop-drain inhibit cordon publish(InMaintenance)"},
		{"in maintenance, a job that cannot be read on", []func(*Snapshot){holding, func(s *Snapshot) {
			s.InProgress, s.Self.Cordoned = true, true
			s.Job = &JobLookup{Job: &jobs.Job{ID: "j", State: "unknown"}}
		}}, "stop-drain inhibit abort"},
		{"idle, the request withdrawn while waiting", []func(*Snapshot){func(s *Snapshot) { s.Request = nil }},
			"stop-drain inhibit release-kured unquarantine show-state(Idle) rm-record tell leave-queues forget ask-reboot"},
		{"waiting second, the head gone: the summary made again", []func(*Snapshot){queued(summary("a", "me"), t0.Add(-50*time.Second))},
			"stop-drain inhibit tell publish(Waiting) renominate(claimed)"},
		{"waiting, its own view makes it the head: the summary written, nothing to claim", []func(*Snapshot){func(s *Snapshot) {
			s.Queues = nil
			s.Mine = &lock.Summary{Nodes: []string{"me", "b"}, Total: 2, ListRV: "102"}
		}}, "stop-drain inhibit tell publish(Waiting) renominate"},
		{"waiting, its own gate closed before, a lock free", []func(*Snapshot){func(s *Snapshot) { s.Own.Blocked = "window" }},
			"stop-drain inhibit tell publish(Waiting) take publish(Waiting)-if-none-taken"},
		{"draining, the drain under way", []func(*Snapshot){drainingLookedUp, func(s *Snapshot) {
			s.Self.Cordoned, s.Self.CordonedByUs = true, true
			s.Drain = &DrainRun{Request: "r1", Progress: "draining: 2 pods left"}
		}}, "inhibit escalation cordon publish(Draining)"},
		{"overbooked: the lock goes back unsaid", []func(*Snapshot){drainingLookedUp, func(s *Snapshot) { s.DrainLookups.Overbooked = str("2 of 1") }},
			"inhibit escalation stop-drain log uncordon release-all tell"},
		{"drained, the job not looked up yet", []func(*Snapshot){drainingLookedUp, func(s *Snapshot) {
			s.Drain = &DrainRun{Request: "r1", Done: true}
		}}, ""},
		{"drained, the job unreadable", []func(*Snapshot){drainingLookedUp, func(s *Snapshot) {
			s.Self.Cordoned, s.Self.CordonedByUs = true, true
			s.Drain = &DrainRun{Request: "r1", Done: true}
			s.Job = &JobLookup{Err: errors.New("jobs directory unreadable")}
		}}, "inhibit escalation cordon forget-drain confirm-held create-in-progress tell abort"},
		{"completing, the Node gone, no lock held", []func(*Snapshot){func(s *Snapshot) { s.Request, s.InProgress, s.Self = nil, true, nil }},
			"stop-drain inhibit publish(Completing) rm-in-progress clear-job release-all poke"},
		{"completing, with a TTL", []func(*Snapshot){holding, func(s *Snapshot) {
			s.Request, s.InProgress, s.Params.TTL = nil, true, time.Minute
		}}, "stop-drain renew inhibit publish(Completing) rm-in-progress clear-job uncordon release-all tell poke"},
		{"released by an admin mid-script", []func(*Snapshot){func(s *Snapshot) {
			s.InProgress, s.Own.ReleasedRequest = true, "r1"
		}}, "stop-drain inhibit release-kured rm-in-progress publish(Failed)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := next(snap(tc.mod...))
			if tc.want == "" {
				if d.Need.Empty() || len(d.Steps) != 0 {
					t.Fatalf("state %s needs nothing (%+v) or plans %s, want a look-up first", d.State, d.Need, acts(d.Steps))
				}
				return
			}
			if !d.Need.Empty() {
				t.Fatalf("state %s still needs %+v", d.State, d.Need)
			}
			if got := acts(d.Steps); got != tc.want {
				t.Errorf("state %s:\n got %s\nwant %s", d.State, got, tc.want)
			}
		})
	}
}

// TestMaintenanceLooksUpItsJob: the managed job is looked up before a
// node in maintenance (or just drained) decides, and its step is
// jobs.Next's.
func TestMaintenanceLooksUpItsJob(t *testing.T) {
	s := snap(func(s *Snapshot) {
		s.Locks["lock-default-0"] = held("lock-default-0", "me")
		s.InProgress, s.Self.Cordoned = true, true
	})
	if d := next(s); !d.Need.Job || len(d.Steps) != 0 {
		t.Fatalf("in maintenance, job not looked up: need %+v, steps %s", d.Need, acts(d.Steps))
	}
	s.Job = &JobLookup{Job: &jobs.Job{ID: "j", Command: []string{"true"}, State: jobs.Pending}, Facts: jobs.Facts{Now: t0}}
	d := next(s)
	last := d.Steps[len(d.Steps)-1]
	want, _ := jobs.Next(*s.Job.Job, s.Job.Facts)
	if last.Do != ActJob || last.Job == nil || last.Job.Step.Do != jobs.Start || last.Job.Step.Do != want.Do || last.Job.Facts != s.Job.Facts {
		t.Fatalf("a pending job: %+v, want it started", last)
	}
}

// TestPlanSaysWhatItDoes: the values the steps carry.
func TestPlanSaysWhatItDoes(t *testing.T) {
	str := func(s string) *string { return &s }
	s := snap(withPolicy(func(p *policy.Spec) { p.Drain.Quarantine = &policy.Quarantine{} }), func(s *Snapshot) {
		s.Locks["lock-default-0"] = held("lock-default-0", "me")
		s.DrainLookups = DrainLookups{KuredRefused: str(""), QuarantineFull: str("")}
		s.Params.RequestFile = "/var/maintenance-required"
		s.Drain = &DrainRun{Request: "r1", Done: true, Err: errors.New("timed out"), TimedOut: true, Stuck: []string{"ns/a", "ns/b"}}
	})
	d := next(s)
	i := slices.IndexFunc(d.Steps, func(st Step) bool { return st.Do == ActPublish })
	if i < 0 || !strings.Contains(d.Steps[i].Message, "pods ns/a, ns/b would not go") || !strings.Contains(d.Steps[i].Message, "remove /var/maintenance-required") {
		t.Fatalf("quarantine's record: %+v", d.Steps)
	}
	tell := d.Steps[i+1]
	if tell.Do != ActTell || len(tell.Effects) != 1 || tell.Effects[0].Event != ReasonQuarantined || tell.Effects[0].Message != d.Steps[i].Message {
		t.Fatalf("quarantine's Event: %+v", tell)
	}

	done := next(snap(func(s *Snapshot) {
		s.Request, s.InProgress = nil, true
		s.Locks["lock-default-0"] = held("lock-default-0", "me")
	}))
	last := done.Steps[len(done.Steps)-2]
	if last.Do != ActTell || len(last.Effects) != 1 || last.Effects[0].Event != ReasonLockReleased || last.Effects[0].Message != "released lock lock-default-0" {
		t.Fatalf("completing: the locks released are said: %+v", done.Steps)
	}

	// A LIST that does not show the record as last written: written
	// again, no LIST asked again.
	relisted := snap(func(s *Snapshot) { s.Paused, s.Queues, s.Listed = true, nil, true })
	if d := next(relisted); d.Need.Queue || !d.Unlisted {
		t.Fatalf("listed already: need %+v, unlisted %v", d.Need, d.Unlisted)
	}

	idle := next(snap(func(s *Snapshot) { s.Request, s.Own.State = nil, lock.Completing }))
	i = slices.IndexFunc(idle.Steps, func(st Step) bool { return st.Do == ActForget })
	if i < 0 || idle.Steps[i].State != lock.Completing || !idle.Steps[i].Succeeded {
		t.Fatalf("idle after success: %+v", idle.Steps)
	}
	tell = idle.Steps[i-2]
	if tell.Do != ActTell || tell.About == nil || len(tell.Effects) == 0 || tell.Effects[0].Event != ReasonMaintenanceCompleted {
		t.Fatalf("idle's effects: %+v", tell)
	}
}
