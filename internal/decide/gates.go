package decide

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/kustodian/kustodian/internal/policy"
)

// groupGates are checked by the head of a queue only: spacing (from the
// group's locks), then what is cluster-wide (read every Poll while at the
// head, so that the nodes behind cost the cluster nothing).
// wake is when to look again (spacing's end, the next read of the
// cluster's facts).
func groupGates(s Snapshot, d *Decision) (out []GateVerdict, wake time.Time) {
	spec := d.Policy.Spec
	if sp := spec.SpacingDuration(); sp > 0 {
		last := lastRelease(s, d.Locks)
		if next := last.Add(sp); !last.IsZero() && s.Now.Before(next) {
			out = append(out, GateVerdict{GateSpacing, Closed, fmt.Sprintf("spacing: the group's last maintenance ended at %s; the next may start at %s",
				last.UTC().Format("15:04:05"), next.UTC().Format("15:04:05 UTC"))})
			wake = next
		} else {
			out = append(out, GateVerdict{Gate: GateSpacing, Verdict: Open})
		}
	} else {
		out = append(out, GateVerdict{Gate: GateSpacing, Verdict: Open})
	}
	wantCluster := spec.Health.MaxUnavailable != nil || spec.Health.WorkloadsRecovered || spec.Blockers.Prometheus != nil ||
		spec.Blockers.Alertmanager != nil
	if wantCluster && (s.Cluster == nil || s.Cluster.For != ClusterKey(*d) || s.stale(s.Cluster.At)) {
		d.Need.Cluster = true
		return out, wake
	}
	if wantCluster {
		// Read again once these facts are Poll old, while at the head.
		next := s.Now.Add(s.Params.Poll)
		if !s.Cluster.At.IsZero() && s.Cluster.At.Add(s.Params.Poll).Before(next) {
			next = s.Cluster.At.Add(s.Params.Poll)
		}
		wake = earliest(wake, next)
	}
	out = append(out, maxUnavailable(s, d, spec))
	out = append(out, workloads(s, d, spec))
	out = append(out, prometheus(s, spec))
	out = append(out, alertmanager(s, spec))
	return out, wake
}

// maxReleaseSkew is how far in the future a lock's released-at may lie
// (hosts' clocks differ) and still count; one further ahead was written by
// a clock far off, or forged to close the spacing gate for good.
const maxReleaseSkew = time.Minute

// lastRelease is the latest release of the group's locks.
func lastRelease(s Snapshot, names []string) time.Time {
	var last time.Time
	for _, name := range names {
		t := s.Locks[name].ReleasedAt
		if t.After(last) && !t.After(s.Now.Add(maxReleaseSkew)) {
			last = t
		}
	}
	return last
}

// maxUnavailable counts the policy's nodes that are NotReady or
// unschedulable, this node included as it would be once granted.
func maxUnavailable(s Snapshot, d *Decision, spec policy.Spec) GateVerdict {
	if spec.Health.MaxUnavailable == nil {
		return GateVerdict{Gate: GateMaxUnavailable, Verdict: Open}
	}
	if s.Cluster.NodesErr != "" {
		return GateVerdict{GateMaxUnavailable, Closed, "cannot count the unavailable nodes: " + s.Cluster.NodesErr}
	}
	// Nodes holding a lock of the policy count even before they cordon.
	holding := map[string]bool{}
	for _, l := range s.Locks {
		if l.Grouped && l.Group.Policy == d.Policy.Name && l.Holder != "" {
			holding[l.Holder] = true
		}
	}
	total := 0
	var down []string
	for _, n := range s.Cluster.Nodes {
		if n.Policy != d.Policy.Name {
			continue
		}
		total++
		switch {
		case n.Name == s.Node:
		case !n.Ready:
			down = append(down, n.Name+" NotReady")
		case n.Unschedulable:
			down = append(down, n.Name+" cordoned")
		case holding[n.Name]:
			down = append(down, n.Name+" in maintenance")
		}
	}
	allowed := spec.MaxUnavailable(total)
	sort.Strings(down)
	if len(down)+1 <= allowed {
		return GateVerdict{Gate: GateMaxUnavailable, Verdict: Open, Reason: fmt.Sprintf("%d of %d allowed nodes unavailable", len(down), allowed)}
	}
	reason := fmt.Sprintf("%d of %d allowed nodes unavailable", len(down)+1, allowed)
	if len(down) > 0 {
		shown := down
		if len(shown) > 5 {
			shown = append(shown[:5:5], fmt.Sprintf("and %d more", len(down)-5))
		}
		reason += ": " + strings.Join(shown, ", ")
	}
	return GateVerdict{GateMaxUnavailable, Closed, reason}
}

// workloads waits until every controller the group's last drains disrupted
// is fully available again.
func workloads(s Snapshot, d *Decision, spec policy.Spec) GateVerdict {
	if !spec.Health.WorkloadsRecovered {
		return GateVerdict{Gate: GateWorkloads, Verdict: Open}
	}
	if s.Cluster.WorkloadsErr != "" {
		return GateVerdict{GateWorkloads, Closed, "cannot read the disrupted workloads: " + s.Cluster.WorkloadsErr}
	}
	var waiting []string
	for _, w := range s.Cluster.Workloads {
		if !w.Gone && w.Available < w.Desired {
			waiting = append(waiting, fmt.Sprintf("%s (%d/%d)", w.Ref, w.Available, w.Desired))
		}
	}
	if len(waiting) == 0 {
		return GateVerdict{Gate: GateWorkloads, Verdict: Open}
	}
	sort.Strings(waiting)
	return GateVerdict{GateWorkloads, Closed, "waiting for " + strings.Join(waiting, ", ") + " to be available again"}
}

// Disrupted lists the controllers recorded on the group's locks: what the
// head must find available before it goes (health.workloadsRecovered).
func Disrupted(s Snapshot, d Decision) []string {
	seen := map[string]bool{}
	var out []string
	for _, name := range d.Locks {
		for _, ref := range s.Locks[name].Disrupted {
			if !seen[ref] {
				seen[ref] = true
				out = append(out, ref)
			}
		}
	}
	sort.Strings(out)
	return out
}

func prometheus(s Snapshot, spec policy.Spec) GateVerdict {
	if spec.Blockers.Prometheus == nil {
		return GateVerdict{Gate: GatePrometheus, Verdict: Open}
	}
	p := s.Cluster.Prometheus
	switch {
	case p == nil:
		return GateVerdict{GatePrometheus, Closed, "Prometheus was not asked"}
	case p.Err != "":
		return GateVerdict{GatePrometheus, Closed, "Prometheus cannot be asked, so it blocks: " + p.Err}
	case len(p.Blocking) > 0:
		verb := "firing"
		if spec.Blockers.Prometheus.Query != "" {
			return GateVerdict{GatePrometheus, Closed, "Prometheus query has results: " + strings.Join(p.Blocking, ", ")}
		}
		if len(p.Blocking) == 1 {
			return GateVerdict{GatePrometheus, Closed, "alert " + p.Blocking[0] + " " + verb}
		}
		return GateVerdict{GatePrometheus, Closed, "alerts " + strings.Join(p.Blocking, ", ") + " " + verb}
	}
	return GateVerdict{Gate: GatePrometheus, Verdict: Open}
}

func alertmanager(s Snapshot, spec policy.Spec) GateVerdict {
	if spec.Blockers.Alertmanager == nil {
		return GateVerdict{Gate: GateAlertmanager, Verdict: Open}
	}
	a := s.Cluster.Alertmanager
	switch {
	case a == nil:
		return GateVerdict{GateAlertmanager, Closed, "Alertmanager was not asked"}
	case a.Err != "":
		return GateVerdict{GateAlertmanager, Closed, "Alertmanager cannot be asked, so it blocks: " + a.Err}
	case len(a.Blocking) == 1:
		return GateVerdict{GateAlertmanager, Closed, "alert " + a.Blocking[0] + " active in Alertmanager (neither silenced nor inhibited)"}
	case len(a.Blocking) > 1:
		return GateVerdict{GateAlertmanager, Closed, "alerts " + strings.Join(a.Blocking, ", ") + " active in Alertmanager (neither silenced nor inhibited)"}
	}
	return GateVerdict{Gate: GateAlertmanager, Verdict: Open}
}
