package decide

import (
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/policy"
)

func released(name string, at time.Time) lock.Lock {
	empty := ""
	return lock.LockOf(&coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{lock.AnnotationReleasedAt: at.Format(time.RFC3339Nano)}},
		Spec: coordv1.LeaseSpec{HolderIdentity: &empty}})
}

func TestQueueAndSlots(t *testing.T) {
	zones := withPolicy(func(p *policy.Spec) { p.GroupBy = "zone"; p.Concurrency = 2 })
	for _, tc := range []struct {
		name string
		s    Snapshot
		try  []string
		msg  string
	}{
		{"second in line, one slot: watch", snap(queued(summary("first", "me"), t0)), nil, "waiting: position 2 of 2"},
		{"a higher priority named first: watch", snap(queued(summary("urgent", "me"), t0)), nil, "position 2 of 2"},
		{"the head took its lock: next", snap(queued(summary("first", "me"), t0), func(s *Snapshot) {
			s.Locks["lock-default-0"] = held("lock-default-0", "first")
			s.Holders["first"] = lock.HolderFacts{NodeExists: true}
		}), nil, "waiting: position 1 of 1, lock held by first"},
		{"the lock held by a live node", snap(func(s *Snapshot) {
			s.Locks["lock-default-0"] = held("lock-default-0", "busy")
			s.Holders["busy"] = lock.HolderFacts{NodeExists: true}
		}), nil, "waiting: position 1 of 1, lock held by busy"},
		{"two slots: the second in line goes too", snap(zones, queued(summary("zone-a-1", "me"), t0)), []string{"lock-p-a-0", "lock-p-a-1"}, "position 2 of 2"},
		{"two slots, one held: the second waits", snap(zones, queued(summary("zone-a-1", "me"), t0), func(s *Snapshot) {
			s.Locks["lock-p-a-0"] = held("lock-p-a-0", "zone-a-9")
			s.Holders["zone-a-9"] = lock.HolderFacts{NodeExists: true}
		}), nil, "position 2 of 2"},
		{"a lock beyond the slots still counts (concurrency lowered)", snap(withPolicy(func(p *policy.Spec) {}), func(s *Snapshot) {
			s.Locks["lock-p-1"] = heldIn("lock-p-1", "other", lock.GroupRef{Policy: "p"})
		}), nil, "position 1 of 1"},
		{"another zone's queue and locks do not count", snap(zones, func(s *Snapshot) {
			s.Queues["queue-p-b"] = QueueState{Summary: summary("b-1", "b-2"), Seen: t0}
			s.Locks["lock-p-b-0"] = held("lock-p-b-0", "b-9")
			s.Locks["lock-p-b-1"] = held("lock-p-b-1", "b-8")
		}), []string{"lock-p-a-0", "lock-p-a-1"}, "position 1 of 1"},
		{"not named, its own view says third: watch", snap(queued(summary("a", "b"), t0), func(s *Snapshot) {
			s.Own.QueueKey = "101"
			s.Mine = &lock.Summary{Nodes: []string{"a", "b", "me"}, Total: 3, ListRV: "102"}
		}), nil, "position 3 of 3 on joining"},
		{"the summary cut short before it: watch", snap(func(s *Snapshot) {
			sum := summary("a", "b")
			sum.Total = 40
			s.Queues = map[string]QueueState{anyGroup: {Summary: sum, Seen: t0}}
			s.Own.QueueKey = "150"
			s.Mine = &lock.Summary{Nodes: []string{"a", "b"}, Total: 41, ListRV: "160"}
		}), nil, "waiting: in the queue behind the first 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := next(tc.s)
			if strings.Join(d.Try, ",") != strings.Join(tc.try, ",") || !strings.Contains(d.Message, tc.msg) || d.Blocked != "" ||
				d.Renominate != "" || !d.Need.Empty() || d.Touch {
				t.Errorf("got try=%v message=%q blocked=%q renominate=%q need=%+v touch=%v, want try=%v message~%q",
					d.Try, d.Message, d.Blocked, d.Renominate, d.Need, d.Touch, tc.try, tc.msg)
			}
		})
	}
}

// TestQueueUpkeep: who makes the group's summary again, and when.
func TestQueueUpkeep(t *testing.T) {
	window := withPolicy(func(p *policy.Spec) { p.Windows = []policy.Window{{Start: "14:00", End: "15:00"}} })
	pods := withPolicy(func(p *policy.Spec) {
		p.Blockers.PodSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kustodian.io/block": "true"}}
	})
	blockingPod := func(s *Snapshot) { s.Pods = []PodFacts{pod("shop", "backup", "me", corev1.PodRunning, true)} }
	for _, tc := range []struct {
		name       string
		s          Snapshot
		need       bool      // make its own view: one LIST
		renominate string    // why it makes the summary again
		touch      bool      // renews the summary
		wake       time.Time // decide again then, at the latest
	}{
		{name: "joined, no view of its own: one LIST", s: snap(queued(summary("a"), t0), func(s *Snapshot) { s.Own.QueueKey = "101" }), need: true},
		{name: "no summary at all: one LIST", s: snap(func(s *Snapshot) { s.Queues = nil }), need: true},
		{name: "its record not yet written: nothing yet", s: snap(func(s *Snapshot) { s.Queues, s.Own = nil, nil })},
		{name: "its view makes it the head of a free slot: write it", s: snap(func(s *Snapshot) {
			s.Queues = nil
			s.Mine = &lock.Summary{Nodes: []string{"me", "b"}, Total: 2, ListRV: "102"}
		}), renominate: "heads the queue"},
		{name: "its view makes it the head, the slot held: wait for the release", s: snap(func(s *Snapshot) {
			s.Queues = nil
			s.Mine = &lock.Summary{Nodes: []string{"me"}, Total: 1, ListRV: "102"}
			s.Locks["lock-default-0"] = held("lock-default-0", "busy")
		})},
		{name: "a newer summary left it out: look again", s: snap(queued(summary("a"), t0), func(s *Snapshot) {
			s.Own.QueueKey = "50" // before the summary's LIST, and it was not cut short
			s.Mine = &lock.Summary{Nodes: []string{"a"}, Total: 1, ListRV: "90"}
		}), need: true},
		{name: "a newer summary without room for it: no LIST", s: snap(func(s *Snapshot) {
			sum := summary("a")
			sum.Total, sum.Last = 30, &lock.Place{Key: "40"}
			s.Queues = map[string]QueueState{anyGroup: {Summary: sum, Seen: t0}}
			s.Own.QueueKey = "50"
			s.Mine = &lock.Summary{Nodes: []string{"a", "b", "me"}, Total: 30, ListRV: "90"}
		})},
		{name: "a higher priority than the last it names: look again", s: snap(queued(summary("a"), t0), func(s *Snapshot) {
			s.Own.QueueKey, s.Own.Priority = "150", 5
			s.Mine = &lock.Summary{Nodes: []string{"a"}, Total: 1, ListRV: "90"}
		}), need: true},
		// Heartbeat 10 s, StaleAfter 40 s: the nodes a summary names behind
		// its heads go over 40-45 s in their order, the others over 45-50 s.
		{name: "second, the head has a free lock and time: wait", s: snap(queued(summary("a", "me"), t0.Add(-30*time.Second))),
			wake: t0.Add(10 * time.Second)},
		{name: "second, the queue did not move for 40 s: the head is gone", s: snap(queued(summary("a", "me"), t0.Add(-40*time.Second))),
			renominate: "a is gone"},
		{name: "third waits a little longer", s: snap(queued(summary("a", "b", "me"), t0.Add(-41*time.Second))),
			wake: t0.Add(1500 * time.Millisecond)},
		{name: "behind eleven named nodes, gone or not: within 45 s all the same", s: snap(queued(summary("a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "me"), t0.Add(-45*time.Second))),
			renominate: "a is gone"},
		{name: "the slot held: nobody is late", s: snap(queued(summary("a", "me"), t0.Add(-time.Hour)), func(s *Snapshot) {
			s.Locks["lock-default-0"] = held("lock-default-0", "busy")
		})},
		{name: "another node claimed the turn and wrote no summary since: the next goes a heartbeat after the claim", s: snap(claimed(summary("a", "b", "me"), t0.Add(-45*time.Second), t0.Add(-5*time.Second), "b")),
			wake: t0.Add(7500 * time.Millisecond)},
		{name: "its own claim not followed by a summary: it goes after the others", s: snap(claimed(summary("a", "me", "b"), t0.Add(-45*time.Second), t0.Add(-5*time.Second), "me")),
			wake: t0.Add(15 * time.Second)},
		{name: "a claim a heartbeat and more ago, nothing since: the next goes", s: snap(claimed(summary("a", "b", "me"), t0.Add(-60*time.Second), t0.Add(-13*time.Second), "b")),
			renominate: "a is gone"},
		{name: "the head's own renewal is no claim: it is alive", s: snap(claimed(summary("a", "me"), t0.Add(-60*time.Second), t0.Add(-30*time.Second), "a")),
			wake: t0.Add(10 * time.Second)},
		{name: "not named, after the named and its jitter", s: snap(queued(summary("a", "b"), t0.Add(-45*time.Second)), func(s *Snapshot) {
			s.Own.QueueKey = "150"
			s.Mine = &lock.Summary{Nodes: []string{"a", "b", "me"}, Total: 3, ListRV: "160"}
			s.Params.Jitter = 0.5
		}), wake: t0.Add(2500 * time.Millisecond)},
		{name: "not named, behind many: within 50 s all the same", s: snap(queued(summary("a", "b", "c", "d", "e", "f", "g", "h"), t0.Add(-50*time.Second)), func(s *Snapshot) {
			s.Own.QueueKey = "150"
			s.Mine = &lock.Summary{Nodes: []string{"a", "b", "c", "d", "e", "f", "g", "h", "me"}, Total: 9, ListRV: "160"}
			s.Params.Jitter = 0.999
		}), renominate: "a is gone"},
		{name: "the head outside its window renews the summary", s: snap(window, queued(summary("me", "b"), t0.Add(-25*time.Second))), touch: true},
		{name: "the head outside its window, renewed lately", s: snap(window, queued(summary("me", "b"), t0.Add(-5*time.Second))),
			wake: t0.Add(15 * time.Second)},
		{name: "the head blocked by a pod passes its turn", s: snap(pods, blockingPod, func(s *Snapshot) { s.Own.Blocked = "blocked by pod shop/backup" }),
			renominate: "blocked"},
		{name: "the head blocked: its record first", s: snap(pods, blockingPod)},
		{name: "blocked further back: nothing", s: snap(pods, blockingPod, queued(summary("a", "me"), t0), func(s *Snapshot) { s.Own.Blocked = "x" })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := next(tc.s)
			if d.Need.Queue != tc.need || (d.Renominate != "") != (tc.renominate != "") || !strings.Contains(d.Renominate, tc.renominate) ||
				d.Touch != tc.touch || (!tc.wake.IsZero() && !d.WakeAt.Equal(tc.wake)) || len(d.Try) > 0 {
				t.Errorf("got need=%v renominate=%q touch=%v wake=%s try=%v message=%q\nwant need=%v renominate~%q touch=%v wake=%s",
					d.Need.Queue, d.Renominate, d.Touch, d.WakeAt, d.Try, d.Message, tc.need, tc.renominate, tc.touch, tc.wake)
			}
		})
	}
}

func TestHolderFactsAreLookedUpOnlyNearTheHead(t *testing.T) {
	s := snap(func(s *Snapshot) { s.Locks["lock-default-0"] = held("lock-default-0", "gone") })
	d := next(s)
	if strings.Join(d.Need.Holders, ",") != "gone" {
		t.Fatalf("need %+v, want the facts of gone", d.Need)
	}
	s.Holders["gone"] = lock.HolderFacts{NodeExists: false}
	if d := next(s); strings.Join(d.Try, ",") != "lock-default-0" {
		t.Errorf("a holder without Node and agent: try %v, want the lock", d.Try)
	}
	far := snap(queued(summary("a", "b", "me"), t0), func(s *Snapshot) { s.Locks["lock-default-0"] = held("lock-default-0", "gone") })
	if d := next(far); len(d.Need.Holders) != 0 {
		t.Errorf("third in line looks up %v", d.Need.Holders)
	}
	s.Params.Owner = &lock.NodeRef{Name: "me", UID: "u"} // node-bound: never takes over
	delete(s.Holders, "gone")
	if d := next(s); len(d.Try) != 0 || len(d.Need.Holders) != 0 || !strings.Contains(d.Message, "lock held by gone") {
		t.Errorf("node-bound agent: try %v need %v message %q", d.Try, d.Need.Holders, d.Message)
	}
}

// claimed is a summary made at changed and renewed at seen by node by.
func claimed(sum lock.Summary, changed, seen time.Time, by string) func(*Snapshot) {
	sum.By = by
	return func(s *Snapshot) {
		s.Queues = map[string]QueueState{anyGroup: {Summary: sum, Seen: seen, Changed: changed}}
	}
}
