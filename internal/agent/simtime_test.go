package agent

import (
	"strings"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kustodian/kustodian/test/simapi"
)

// advance lets time pass: to the next timer of anyone, or a little.
func (w *world) advance() {
	next := time.Time{}
	for _, h := range w.hosts {
		next = earliestOf(next, h.nextTimer(), h.scriptDone, h.nodeBackAt)
		if !h.running() && !h.restartAt.IsZero() {
			next = earliestOf(next, h.restartAt)
		}
	}
	if w.api.Down {
		next = earliestOf(next, w.faults.downUntil)
	}
	step := time.Duration(w.rng.IntN(3000)) * time.Millisecond
	if !next.IsZero() && next.After(w.now) && (w.rng.IntN(2) == 0 || next.Sub(w.now) < step) {
		step = next.Sub(w.now)
	}
	if step <= 0 {
		step = time.Millisecond
	}
	w.now = w.now.Add(step)
	w.clock.SetTime(w.now)
}

// pendingWatches reports whether a watch has changes to deliver.
func (h *host) pendingWatches() bool {
	for _, sw := range h.watches {
		if sw.pending(h.w.api) {
			return true
		}
	}
	return false
}

// deliverWatches delivers some of what one watch has pending (or all of
// every watch's), in order.
func (h *host) deliverWatches() {
	w := h.w
	if w.api.Down {
		return // a watch delivers nothing while the control plane is away
	}
	if w.rng.IntN(3) != 0 {
		for _, sw := range h.watches {
			sw.deliver(w.api, -1)
		}
		return
	}
	var c []*simWatch
	for _, sw := range h.watches {
		if sw.pending(w.api) {
			c = append(c, sw)
		}
	}
	if len(c) == 0 {
		return
	}
	c[w.rng.IntN(len(c))].deliver(w.api, 1+w.rng.IntN(3))
}

// settled reports whether every node is back: no request, no in-progress
// file, no record, no lock held, nothing cordoned.
func (w *world) settled() bool { return w.unsettled() == "" }

func (w *world) unsettled() string {
	var out []string
	for _, h := range w.hosts {
		if h.requested() || h.inProgress() {
			out = append(out, h.name+" still has its request or in-progress file")
		}
	}
	leases, _ := w.api.List(simapi.Leases, simNamespace, nil, nil)
	for _, o := range leases {
		l := o.(*coordv1.Lease)
		switch {
		case strings.HasPrefix(l.Name, "node-"):
			out = append(out, "record "+l.Name+" remains")
		case strings.HasPrefix(l.Name, "lock-") && holderOf(l) != "":
			out = append(out, "lock "+l.Name+" held by "+holderOf(l))
		}
	}
	nodes, _ := w.api.List(simapi.Nodes, "", nil, nil)
	for _, o := range nodes {
		if n := o.(*corev1.Node); n.Spec.Unschedulable {
			out = append(out, n.Name+" is cordoned")
		}
	}
	return strings.Join(out, "; ")
}
