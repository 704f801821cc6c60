package agent

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	coordv1 "k8s.io/api/coordination/v1"

	"github.com/kustodian/kustodian/test/simapi"
)

type judge struct {
	w *world
	// freeSince: since when a group has had a free slot and an eligible
	// node asking; lingering: since when a node without a request has had
	// a record or a place in a summary.
	freeSince map[string]time.Time
	lingering map[string]time.Time
	bound     time.Duration
}

func newJudge(w *world) *judge {
	hb := w.cfg.Queue.Heartbeat
	stale := 4 * hb
	// A queue whose head is gone moves once the summary has not changed
	// for stale + a heartbeat, however many nodes are ahead; twice when
	// the LIST of the first round still saw a node that had just died as
	// live. An agent backing off after an outage waits 30 s at most; and a
	// minute for everything else (the simulation's own delays: a watch
	// delivers, an agent steps, seconds late).
	bound := 2*(stale+hb) + 30*time.Second + time.Minute
	return &judge{w: w, freeSince: map[string]time.Time{}, lingering: map[string]time.Time{}, bound: bound}
}

func holderOf(l *coordv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func (j *judge) check() error {
	w := j.w
	leases, _ := w.api.List(simapi.Leases, simNamespace, nil, nil)
	holders := map[string][]string{} // group -> holders of its locks
	holds := map[string]string{}     // node -> group of a lock it holds
	records := map[string]bool{}
	named := map[string]bool{} // nodes a queue summary names
	for _, o := range leases {
		l := o.(*coordv1.Lease)
		switch {
		case strings.HasPrefix(l.Name, "lock-"):
			if l.Labels[judgeLabelPolicy] != w.policyName() {
				continue
			}
			g := l.Annotations[judgeAnnotationGroup]
			if h := holderOf(l); h != "" {
				holders[g] = append(holders[g], h)
				holds[h] = g
			}
		case strings.HasPrefix(l.Name, "node-"):
			records[strings.TrimPrefix(l.Name, "node-")] = true
		case strings.HasPrefix(l.Name, "queue-"):
			var s struct {
				Nodes []string `json:"nodes"`
			}
			if err := json.Unmarshal([]byte(l.Annotations[judgeAnnotationQueue]), &s); err == nil {
				for _, n := range s.Nodes {
					named[n] = true
				}
			}
		}
	}
	// Safety.
	inMaintenance := map[string][]string{}
	for _, h := range w.hosts {
		if h.exempt && !h.inProgress() {
			h.exempt = false
		}
		if !h.inProgress() || h.nodeGone || h.exempt {
			continue
		}
		g := w.group(h)
		inMaintenance[g] = append(inMaintenance[g], h.name)
		if holds[h.name] != g {
			// Its lock may have gone with a deleted Node; the rest must hold.
			return fmt.Errorf("%s is in maintenance (its in-progress file exists) but holds no lock of its group %q; locks: %v", h.name, g, holders)
		}
	}
	for g, ns := range inMaintenance {
		if len(ns) > w.concurrency {
			return fmt.Errorf("group %q has %d slots but %d nodes in maintenance: %v", g, w.concurrency, len(ns), ns)
		}
	}
	if w.api.Down {
		// Nothing can move; the clocks start again when it is back.
		clear(j.freeSince)
		clear(j.lingering)
		return nil
	}
	// Liveness: a free slot and a node that asks, whose gates are open.
	asking := map[string][]string{}
	for _, h := range w.hosts {
		if h.requested() && h.running() && !h.nodeGone && !w.paused && holds[h.name] == "" && h.restartAt.IsZero() {
			asking[w.group(h)] = append(asking[w.group(h)], h.name)
		}
	}
	for _, g := range w.groups() {
		if len(holders[g]) < w.concurrency && len(asking[g]) > 0 {
			if _, ok := j.freeSince[g]; !ok {
				j.freeSince[g] = w.now
			}
			if d := w.now.Sub(j.freeSince[g]); d > j.bound {
				return fmt.Errorf("group %q has had a free slot (held: %v of %d) for %s while %v asked: nobody took it", g, holders[g], w.concurrency, d.Round(time.Second), asking[g])
			}
		} else {
			delete(j.freeSince, g)
		}
	}
	// No agent fails the same step for ever.
	for _, h := range w.hosts {
		if h.running() && !h.nodeGone && h.sameErr > 10 {
			return fmt.Errorf("%s failed the same step %d times in a row: %s", h.name, h.sameErr, h.lastErr)
		}
	}
	// A node without a request leaves no record and no place in a queue.
	for _, h := range w.hosts {
		idle := !h.requested() && !h.inProgress() && !h.nodeGone && (h.running() || h.exitedIdle)
		left := records[h.name] || (h.stay && named[h.name])
		if idle && left {
			if _, ok := j.lingering[h.name]; !ok {
				j.lingering[h.name] = w.now
			}
			if d := w.now.Sub(j.lingering[h.name]); d > j.bound {
				return fmt.Errorf("%s asks for nothing, yet for %s it has kept its record (%v) or its place in a queue summary (%v)", h.name, d.Round(time.Second), records[h.name], named[h.name])
			}
		} else {
			delete(j.lingering, h.name)
		}
	}
	return nil
}

// groups are the groups the judge knows of.
func (w *world) groups() []string {
	seen := map[string]bool{}
	var out []string
	for _, h := range w.hosts {
		if g := w.group(h); !seen[g] {
			seen[g] = true
			out = append(out, g)
		}
	}
	sort.Strings(out)
	return out
}

func (w *world) policyText() string {
	if !w.hasPolicy {
		return "none (the built-in default: one node at a time)"
	}
	return fmt.Sprintf("concurrency %d, groupBy %q", w.concurrency, w.groupBy)
}

// policyName is the name of the policy whose locks the judge counts.
func (w *world) policyName() string {
	if !w.hasPolicy {
		return "default"
	}
	return "sim"
}
