package lock

import (
	"fmt"
	"sort"
	"strings"

	coordv1 "k8s.io/api/coordination/v1"

	"github.com/kustodian/kustodian/internal/policy"
)

// NodeHealth is what health.maxUnavailable counts of a Node.
type NodeHealth struct {
	Name string
	// Policy is the node's MaintenancePolicy, resolved from its labels as
	// its own agent resolves it.
	Policy        string
	Ready         bool
	Unschedulable bool
}

// Overbooked is the check a node makes after taking a lock of a policy with
// health.maxUnavailable, before it cordons: the heads of two groups (or two
// slots of one) may each have found room for one more node in the same
// instant. Read afresh from the API server, the policy's locks say who else
// holds one; of two holders, the one whose lock was taken earlier (the lower
// resourceVersion at which it was taken: the API server's order, not a
// clock) keeps it and the other gives its lock back. Nodes that are NotReady
// or cordoned count as well. locks are the namespace's lock Leases, read
// afresh.
func Overbooked(me string, p policy.Effective, locks []*coordv1.Lease, nodes []NodeHealth) (bool, string) {
	var holders []lockHolder
	mine := ""
	for _, l := range locks {
		g, _ := GroupOfLease(l)
		h := lockHolder{Policy: g.Policy, Holder: Holder(l), Version: l.ResourceVersion}
		holders = append(holders, h)
		// The lock this node took last, if it holds more than one.
		if h.Holder == me && h.Policy == p.Name && (mine == "" || earlier(mine, h.Version)) {
			mine = h.Version
		}
	}
	if mine == "" {
		return false, "" // it holds no lock of this policy
	}
	return overbooked(me, mine, p, holders, nodes)
}

func overbooked(me, myVersion string, p policy.Effective, locks []lockHolder, nodes []NodeHealth) (bool, string) {
	if p.Spec.Health.MaxUnavailable == nil {
		return false, ""
	}
	down := map[string]string{}
	total := 0
	for _, n := range nodes {
		if n.Policy != p.Name {
			continue
		}
		total++
		switch {
		case n.Name == me:
		case !n.Ready:
			down[n.Name] = n.Name + " NotReady"
		case n.Unschedulable:
			down[n.Name] = n.Name + " cordoned"
		}
	}
	for _, l := range locks {
		if l.Policy != p.Name || l.Holder == "" || l.Holder == me || down[l.Holder] != "" {
			continue
		}
		if earlier(l.Version, myVersion) {
			down[l.Holder] = l.Holder + " took its lock first"
		}
	}
	allowed := p.Spec.MaxUnavailable(total)
	if len(down)+1 <= allowed {
		return false, ""
	}
	var why []string
	for _, w := range down {
		why = append(why, w)
	}
	sort.Strings(why)
	return true, fmt.Sprintf("%d of %d allowed nodes unavailable: %s", len(down)+1, allowed, strings.Join(why, ", "))
}

// lockHolder is a lock as Overbooked needs it.
type lockHolder struct {
	Policy  string
	Holder  string
	Version string // the Lease's resourceVersion
}

// earlier compares resource versions as the API server orders them; an
// unreadable one counts as earlier, so that the check errs on the safe side.
func earlier(a, b string) bool {
	cmp, ok := VersionOrder(a, b)
	return !ok || cmp < 0
}
