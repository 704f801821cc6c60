package rollout

import "slices"

// PatchClaimHeld says whether another node's claim of r's set, for r's
// signed spec now, stands in the way of a new claim: it is not proven yet, and
// its node's entry is live (queued, running, rolling back, retrying, or
// succeeded). A claim whose node withdrew, failed or has no entry may be
// claimed again; so may a set of an older spec. The admission policy
// holds a node to the same rule.
func (r *MaintenanceRollout) PatchClaimHeld() bool {
	s := r.Status.Patch
	if s.ClaimedBy(r.Spec.Signature) == "" || s.ResolvedAt != nil {
		return false
	}
	e := r.Entry(s.ResolvedOn)
	if e == nil {
		return false
	}
	switch e.State {
	case Waiting, Running, RollingBack, Retrying, Succeeded:
		return true
	}
	return false
}

// NodePatchOf is a node's entry of what it changed: changes (From: its
// own version before) against the campaign's set, rebooted or not.
func NodePatchOf(set, changes []PackageChange, rebooted bool) NodePatch {
	n := len(changes)
	np := NodePatch{Changed: &n, Rebooted: rebooted}
	byName := map[string]PackageChange{}
	for _, p := range set {
		byName[p.Name] = p
	}
	changed := map[string]bool{}
	for _, c := range changes {
		changed[c.Name] = true
		if p, ok := byName[c.Name]; ok && p == c {
			continue
		}
		if len(np.Packages) == MaxNodePackages {
			np.Cut = true
			continue
		}
		np.Packages = append(np.Packages, c)
	}
	for _, p := range set {
		if changed[p.Name] {
			continue
		}
		if len(np.Skipped) == MaxNodePackages {
			np.Cut = true
			continue
		}
		np.Skipped = append(np.Skipped, p.Name)
	}
	return np
}

// ChangesOf is what a node changed, from its entry and the set: complete
// is false when its entry's lists were cut (the host's job directory has
// them whole).
func ChangesOf(set []PackageChange, np NodePatch) (changes []PackageChange, complete bool) {
	if np.Changed == nil {
		return nil, false
	}
	for _, p := range set {
		if slices.Contains(np.Skipped, p.Name) {
			continue
		}
		if i := slices.IndexFunc(np.Packages, func(d PackageChange) bool { return d.Name == p.Name }); i >= 0 {
			changes = append(changes, np.Packages[i])
			continue
		}
		changes = append(changes, p)
	}
	for _, d := range np.Packages {
		if !slices.ContainsFunc(set, func(p PackageChange) bool { return p.Name == d.Name }) {
			changes = append(changes, d)
		}
	}
	return changes, !np.Cut && len(changes) == *np.Changed
}
