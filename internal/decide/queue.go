package decide

import (
	"fmt"
	"strings"
	"time"

	"github.com/kustodian/kustodian/internal/lock"
)

// queueView is where this node stands in its group's queue.
type queueView struct {
	state *QueueState // the stored summary; nil when there is none that reads
	// named are the nodes the stored summary names that hold no lock: the
	// queue still ahead, in order; at is this node's index there, or -1.
	named []string
	at    int
	// total counts the named and those the summary was too short for.
	total int
	// mine is this node's index in its own view (Snapshot.Mine), or -1,
	// and mineTotal that view's length.
	mine, mineTotal int
	seen            time.Time // when the summary last changed, or its head renewed it
	// claimed: when a node other than its head renewed the summary, the
	// last change seen (a claim of the turn, takeoverAfter); claimBy: who.
	claimed time.Time
	claimBy string
}

// queueStep is what a Waiting node reads of its group's queue, in one go:
// its place, the group's locks it may take if its turn comes, and what
// keeping the queue's summary true asks of it (upkeep for an eligible
// node, touch for the head).
type queueStep struct {
	need      []string // the holders whose facts must be looked up first
	free      []string
	message   string // "waiting: position 3 of 7, lock held by b"
	position  int
	total     int
	ahead     int
	behindCut bool
	// atHead: the node's turn has come (a lock is free for its place);
	// heads: it heads the queue (a lock free for it, or none free).
	atHead, heads bool
	upkeep        upkeep
	touch         struct {
		now  bool      // renew the summary now
		wake time.Time // or then
	}
}

// upkeep is what keeping the group's summary true asks of an eligible
// node: wait for it (list: make its own view, one LIST; or renominate:
// write the summary again, saying why), or only wake at wake.
type upkeep struct {
	wait       bool
	list       bool
	renominate string
	takeover   bool // renominate takes a gone head's turn: claim it first
	wake       time.Time
}

// queueAt reads the group's queue for a Waiting node.
func queueAt(s Snapshot, d *Decision) queueStep {
	q := s.queueOf(d.Group)
	var st queueStep
	var holders []string
	st.free, holders, st.need = freeLocks(s, d, q)
	st.message = q.message(holders)
	st.position, st.total = q.position()
	st.behindCut = q.at < 0 && q.mine < 0 && q.state != nil && q.state.Summary.Cut()
	st.ahead = max(st.position-1, 0)
	if q.at < 0 && q.state != nil && q.state.Summary.Cut() {
		// Not named in a cut summary: its own view's place (made when it
		// joined) counts the nodes served since; the summary's names are
		// all that is known to be ahead.
		st.ahead = min(st.ahead, len(q.named))
		if st.behindCut {
			st.ahead = len(q.named)
		}
	}
	st.atHead = q.at >= 0 && q.at < len(st.free)
	st.heads = q.at >= 0 && q.at < max(len(st.free), 1)
	st.upkeep = queueUpkeep(s, d, q, st.free, st.atHead)
	if q.at == 0 && len(st.free) > 0 && q.state != nil {
		// The head waits on a gate with a slot free: it renews the summary
		// every two heartbeats, so that the nodes behind it know it is
		// alive.
		due := q.seen.Add(2 * s.Params.Heartbeat)
		if s.Now.Before(due) {
			st.touch.wake = due
		} else {
			st.touch.now = true
		}
	}
	return st
}

// queueOf reads the group's summary.
func (s Snapshot) queueOf(g lock.GroupRef) queueView {
	v := queueView{at: -1, mine: -1, seen: s.Watching}
	holding := map[string]bool{}
	for _, l := range s.Locks {
		if l.Holder != "" {
			holding[l.Holder] = true
		}
	}
	notHolding := func(nodes []string) []string {
		var out []string
		for _, n := range nodes {
			if !holding[n] {
				out = append(out, n)
			}
		}
		return out
	}
	if qs, ok := s.Queues[g.QueueName()]; ok && qs.Err == nil {
		v.state = &qs
		v.named = notHolding(qs.Summary.Nodes)
		v.total = len(v.named) + qs.Summary.Total - len(qs.Summary.Nodes)
		v.at = index(v.named, s.Node)
		last := qs.Seen
		if by := qs.Summary.By; !qs.Changed.IsZero() && qs.Seen.After(qs.Changed) && by != "" && (len(v.named) == 0 || by != v.named[0]) {
			// Renewed, not changed, by another node than its head: a
			// claim. It says nothing of the head.
			v.claimed, v.claimBy, last = qs.Seen, by, qs.Changed
		}
		if last.After(v.seen) {
			v.seen = last
		}
	}
	if s.Mine != nil {
		mine := notHolding(s.Mine.Nodes)
		v.mine = index(mine, s.Node)
		v.mineTotal = len(mine) + s.Mine.Total - len(s.Mine.Nodes)
	}
	return v
}

func index(nodes []string, node string) int {
	for i, n := range nodes {
		if n == node {
			return i
		}
	}
	return -1
}

// position is the node's place (1 for the head) and the queue's length as
// the message says them; 0, 0 while it is not known.
func (v queueView) position() (int, int) {
	switch {
	case v.at >= 0:
		return v.at + 1, max(v.total, v.at+1)
	case v.mine >= 0:
		return v.mine + 1, max(v.mineTotal, v.mine+1)
	}
	return 0, 0
}

// message is the node's place: "waiting: position 3 of 7, lock held by b".
func (v queueView) message(holders []string) string {
	var msg string
	switch {
	case v.at >= 0:
		at, total := v.position()
		msg = fmt.Sprintf("waiting: position %d of %d", at, total)
	case v.mine >= 0:
		// Its own view, made when it joined: the nodes behind it since
		// are counted at the next handoff.
		at, total := v.position()
		msg = fmt.Sprintf("waiting: position %d of %d on joining", at, total)
	case v.state != nil && v.state.Summary.Cut():
		msg = fmt.Sprintf("waiting: in the queue behind the first %d", len(v.named))
	default:
		msg = "waiting: joining the queue"
	}
	if len(holders) > 0 {
		msg += ", lock held by " + strings.Join(holders, ", ")
	}
	return msg
}

// freeLocks are the group's locks this node may take if its turn comes,
// and the holders of the others. Locks of the group beyond its slots
// (concurrency lowered since they were taken) still count against them.
// Whether a holder's lock may be taken over is looked up (Need.Holders)
// only for an agent that may take over (no Owner) and only near the head.
func freeLocks(s Snapshot, d *Decision, q queueView) (free, holders, need []string) {
	mine := map[string]bool{}
	for _, name := range d.Locks {
		mine[name] = true
	}
	extra := 0
	for name, l := range s.Locks {
		if l.Grouped && l.Group == d.Group && !mine[name] && l.Holder != "" && l.Holder != s.Node {
			extra++
		}
	}
	nearHead := (q.at >= 0 && q.at < len(d.Locks)) || (q.at < 0 && q.mine >= 0 && q.mine < len(d.Locks))
	for _, name := range d.Locks {
		l := s.Locks[name]
		h := l.Holder
		facts := lock.HolderFacts{}
		if h != "" && h != s.Node {
			f, ok := s.Holders[h]
			switch {
			case ok:
				facts = f
			case s.Params.Owner == nil && nearHead:
				need = append(need, h)
				continue
			default:
				// Its record is not watched: a holder counts as there.
				facts = lock.HolderFacts{NodeExists: true}
			}
		}
		if lock.Decide(l, s.Node, facts, s.Now, lock.Params{StaleAfter: s.Params.StaleAfter, TTL: s.Params.TTL, Owner: s.Params.Owner}).Free {
			free = append(free, name)
		} else {
			holders = append(holders, h)
		}
	}
	return free[:max(0, len(free)-extra)], holders, need
}

// queueUpkeep is what keeping the group's summary true asks of an eligible
// node (no gate of its own closed), and whether the decision must wait
// for it:
//   - a node the summary does not name makes its own view (Mine, one LIST)
//     when it has none, or when the summary left it out and is newer;
//     when its view makes it a head, it writes it (Renominate);
//   - with a slot free, a node behind the heads makes the summary again
//     once it has not changed for StaleAfter and a little (takeoverAfter):
//     its head is gone, or it would have renewed it (Touch).
func queueUpkeep(s Snapshot, d *Decision, q queueView, free []string, atHead bool) upkeep {
	if q.at < 0 {
		// Its record first: the LIST must see it eligible, and in this
		// group. A record written under another group (its Node was gone,
		// or the policy changed since) is left out of this group's LIST;
		// looking again before it is written anew would never end.
		if s.Own == nil || s.Own.State != lock.Waiting || s.Own.OwnGateClosed() || s.Own.GroupRef() != d.Group {
			return upkeep{}
		}
		stale := s.Mine == nil || (q.mine < 0 && !s.Mine.Cut()) ||
			(q.state != nil && q.state.Summary.LeavesOut(*s.Own, *s.Mine))
		if stale {
			return upkeep{wait: true, list: true}
		}
		if q.mine >= 0 && q.mine < len(free) {
			return upkeep{wait: true, renominate: "this node heads the queue and its summary does not say so"}
		}
	}
	if len(free) == 0 || atHead {
		return upkeep{}
	}
	after := takeoverAfter(s.Params, q.at-len(free), len(q.named)-len(free))
	due := q.seen.Add(after)
	if !q.claimed.IsZero() {
		// A node claimed the turn and has written no summary since: a
		// heartbeat for it, then the nodes behind go again in their
		// order, the claimer last (its LIST or write may keep failing).
		again := q.claimed.Add(s.Params.Heartbeat + after - s.Params.StaleAfter)
		if q.claimBy == s.Node {
			again = again.Add(s.Params.Heartbeat)
		}
		if again.After(due) {
			due = again
		}
	}
	if s.Now.Before(due) {
		return upkeep{wake: due}
	}
	head := "its head"
	if len(q.named) > 0 {
		head = q.named[0]
	}
	return upkeep{wait: true, takeover: true, renominate: fmt.Sprintf("a lock is free and the queue has not moved for %s: %s is gone", s.Now.Sub(q.seen).Round(time.Second), head)}
}

// takeoverAfter is how long a summary may stay unchanged, a slot free,
// before a node behind its heads makes it again: StaleAfter (a head that
// waits renews it every two heartbeats), then within one heartbeat, in an
// order that makes one node go first and the others see its write. The
// nodes it names behind the heads (behind of them, this one at index at,
// -1 when not named) go in their order over the first half heartbeat;
// those it does not name over the second half, by their jitter. The wait
// depends on no count of nodes ahead: the nodes it names may all be gone
// (their records are not watched), and a live node must not wait a
// heartbeat for each. The node that goes first claims the turn with a
// write of the summary's Lease before its LIST (lockapi.TouchSummary), so
// the others wait instead of all listing the records at once: a heartbeat,
// then they go again in their order with the claimer last, so a node whose
// LIST keeps failing after its claim stalls the group no longer than that.
func takeoverAfter(p Params, at, behind int) time.Duration {
	half := p.Heartbeat / 2
	if at >= 0 {
		return p.StaleAfter + half*time.Duration(at)/time.Duration(max(behind, 1))
	}
	return p.StaleAfter + half + time.Duration(p.Jitter*float64(half))
}
