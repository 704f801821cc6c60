package patch

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Resolve is the set a campaign's first node installs: the updates s
// picks, with the new packages they need. A package the set needs that s
// leaves out is an error naming both: the campaign would install what it
// was told not to.
func Resolve(ctx context.Context, m Manager, s Spec) ([]Package, error) {
	cands, err := m.Updates(ctx)
	if err != nil {
		return nil, err
	}
	picked := Select(s, cands)
	if len(picked) == 0 {
		return nil, nil
	}
	plan, err := m.Simulate(ctx, picked)
	if err != nil {
		return nil, err
	}
	for _, p := range plan {
		if find(picked, p.Name) != nil {
			continue
		}
		if why := LeftOut(s, p.Name); why != "" {
			return nil, fmt.Errorf("the updates need %s %s, which %s: exclude what needs it too, or include it", p.Name, p.To, why)
		}
	}
	sortByName(plan)
	return plan, nil
}

// Check is what installing set changes on this host: the packages of set
// not at their version yet, From what is installed here. A change outside
// set, or to another version, is an error naming it: the node installs
// exactly what the first node proved, or nothing.
func Check(ctx context.Context, m Manager, set []Package, installed map[string]string) ([]Package, error) {
	if err := ValidSet(set); err != nil {
		return nil, err
	}
	var todo []Package
	for _, p := range set {
		if installed[p.Name] != p.To {
			todo = append(todo, p)
		}
	}
	if len(todo) == 0 {
		return nil, nil
	}
	plan, err := m.Simulate(ctx, todo)
	if err != nil {
		return nil, err
	}
	var outside []string
	for i, p := range plan {
		q := find(set, p.Name)
		switch {
		case q == nil:
			outside = append(outside, fmt.Sprintf("%s %s (not in the set)", p.Name, p.To))
		case q.To != p.To:
			outside = append(outside, fmt.Sprintf("%s %s (the set has %s)", p.Name, p.To, q.To))
		}
		plan[i].From = installed[p.Name]
	}
	if len(outside) > 0 {
		return nil, fmt.Errorf("installing the campaign's set here would also install %s: stopping before anything is installed", strings.Join(outside, ", "))
	}
	sortByName(plan)
	return plan, nil
}

// Changes are the changes between two sets of installed versions, of the
// packages named in set.
func Changes(set []Package, before, after map[string]string) []Package {
	var out []Package
	for _, p := range set {
		if b, a := before[p.Name], after[p.Name]; a != b {
			out = append(out, Package{Name: p.Name, From: b, To: a})
		}
	}
	sortByName(out)
	return out
}

func find(set []Package, name string) *Package {
	if i := slices.IndexFunc(set, func(p Package) bool { return p.Name == name }); i >= 0 {
		return &set[i]
	}
	return nil
}

func sortByName(ps []Package) {
	slices.SortFunc(ps, func(a, b Package) int { return strings.Compare(a.Name, b.Name) })
}

// A package's name and versions as Debian and RPM write them. The set
// comes from the cluster (the first node's resolution): a name that
// began with '-' would be an option to the package manager, run as root.
var (
	packageName    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9+._-]{0,127}(:[a-z0-9-]{1,32})?$`)
	packageVersion = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.+~^:_-]{0,127}$`)
)

// ValidSet is an error naming the first change of set that is not a
// package name and versions.
func ValidSet(set []Package) error {
	for i, p := range set {
		switch {
		case !packageName.MatchString(p.Name):
			return fmt.Errorf("the set's package %d: %q is not a package name", i, p.Name)
		case !packageVersion.MatchString(p.To):
			return fmt.Errorf("the set's package %s: %q is not a version", p.Name, p.To)
		case p.From != "" && !packageVersion.MatchString(p.From):
			return fmt.Errorf("the set's package %s: %q is not a version", p.Name, p.From)
		}
	}
	return nil
}
