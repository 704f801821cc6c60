package status

import (
	"fmt"
	"sort"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/policy"
)

// PolicyList is the documented output of `kustodian-ctl policy -o json|yaml`.
type PolicyList struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Items      []PolicyStatus `json:"items"`
}

// PolicyStatus is one policy as the cluster applies it now.
type PolicyStatus struct {
	Name       string        `json:"name"`
	Precedence int32         `json:"precedence"`
	Nodes      int           `json:"nodes"`
	Groups     []GroupStatus `json:"groups"`
	// Window: "always", "open until ...", "closed: next opens ...".
	Window string `json:"window"`
	// Errors are nodes the policy holds because it cannot be applied to them.
	Errors []string `json:"errors,omitempty"`
}

// GroupStatus is one group of a policy.
type GroupStatus struct {
	Name   string   `json:"name"`
	Nodes  int      `json:"nodes"`
	Slots  int      `json:"slots"`
	InUse  int      `json:"inUse"`
	Holder []string `json:"holders,omitempty"`
}

// Policies computes which nodes follow which policy, their groups, the
// slots in use and the next window. The built-in default is listed when a
// node follows it.
func Policies(policies []*policy.MaintenancePolicy, nodes []corev1.Node, leases []coordv1.Lease, now time.Time) PolicyList {
	byName := map[string]*PolicyStatus{}
	groups := map[lock.GroupRef]*GroupStatus{}
	specs := map[string]policy.Effective{}
	get := func(name string, prec int32) *PolicyStatus {
		if p := byName[name]; p != nil {
			return p
		}
		p := &PolicyStatus{Name: name, Precedence: prec, Groups: []GroupStatus{}}
		byName[name] = p
		return p
	}
	for _, p := range policies {
		get(p.Name, p.Spec.Precedence)
	}
	for _, n := range nodes {
		e := policy.Resolve(policies, n.Labels)
		ps := get(e.Name, e.Spec.Precedence)
		ps.Nodes++
		if e.Err != nil {
			ps.Errors = append(ps.Errors, Printable(n.Name+": "+e.Err.Error()))
			continue
		}
		specs[e.Name] = e
		g := lock.GroupRef{Policy: e.Name, Group: e.Group}
		if groups[g] == nil {
			groups[g] = &GroupStatus{Name: g.String(), Slots: e.Spec.Slots()}
		}
		groups[g].Nodes++
	}
	for g, gs := range groups {
		names := map[string]bool{}
		for _, n := range g.LockNames(gs.Slots) {
			names[n] = true
		}
		for i := range leases {
			if h := lock.Holder(&leases[i]); names[leases[i].Name] && h != "" {
				gs.InUse++
				gs.Holder = append(gs.Holder, h)
			}
		}
		sort.Strings(gs.Holder)
		byName[g.Policy].Groups = append(byName[g.Policy].Groups, *gs)
	}
	out := PolicyList{APIVersion: APIVersion, Kind: "MaintenancePolicyStatusList", Items: []PolicyStatus{}}
	for name, ps := range byName {
		sort.Slice(ps.Groups, func(i, j int) bool { return ps.Groups[i].Name < ps.Groups[j].Name })
		ps.Window = windowSummary(policies, name, specs, now)
		out.Items = append(out.Items, *ps)
	}
	sort.Slice(out.Items, func(i, j int) bool { return out.Items[i].Name < out.Items[j].Name })
	return out
}

func windowSummary(policies []*policy.MaintenancePolicy, name string, specs map[string]policy.Effective, now time.Time) string {
	var windows []policy.Window
	var excluded []string
	for _, p := range policies {
		if p.Name == name {
			windows, excluded = p.Spec.Windows, p.Spec.ExcludeDates
		}
	}
	if len(windows) == 0 {
		return "always"
	}
	s, err := policy.ParseSchedule(windows, excluded)
	if err != nil {
		return "invalid: " + err.Error()
	}
	v := s.At(now)
	if v.Open {
		return fmt.Sprintf("open until %s", v.Change.UTC().Format("Mon 15:04 UTC"))
	}
	return "closed: " + v.Next
}
