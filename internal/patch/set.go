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
		return []Package{}, nil
	}
	plan, err := m.Simulate(ctx, picked)
	if err != nil {
		return nil, err
	}
	out := make([]Package, 0, len(plan))
	for _, c := range plan {
		if find(picked, c.Name) == nil {
			if why := LeftOut(s, c.Name); why != "" {
				return nil, fmt.Errorf("the updates need %s %s, which %s: exclude what needs it too, or include it", c.Name, c.To, why)
			}
		}
		out = append(out, c.Package)
	}
	sortByName(out)
	return out, nil
}

// Check is what installing set changes on this host: the upgrades of set
// whose packages this host has at an older version, and the new packages
// apt needs for them, From what apt says is installed. It holds the set to
// the spec as the first node did (a set comes from the cluster, written by
// that node, which may lie): an upgrade the spec does not pick, a need the
// spec leaves out, a package apt would install that the set does not
// hold, or at another version, is an error naming it, and nothing is
// installed. A package of the set this host does not have is not
// installed here; one it has at that version or newer is left as it is.
func Check(ctx context.Context, m Manager, s Spec, set []Package, installed map[string]string) ([]Package, error) {
	if err := ValidSet(set); err != nil {
		return nil, err
	}
	var todo []Package
	for _, p := range set {
		have := installed[p.Name]
		if p.From == "" || have == "" {
			continue // a need of the first node's, or a package this host does not have
		}
		newer, err := m.Newer(ctx, p.To, have)
		if err != nil {
			return nil, err
		}
		if newer {
			todo = append(todo, p)
		}
	}
	if len(todo) == 0 {
		return []Package{}, nil
	}
	plan, err := m.Simulate(ctx, todo)
	if err != nil {
		return nil, err
	}
	// Where this host's own upgrades come from: a version of the set from
	// a source its package manager would not upgrade from by itself
	// (backports, say) is not one the spec picks here, whatever the set's
	// writer says.
	own, err := m.Updates(ctx)
	if err != nil {
		return nil, err
	}
	var wrong []string
	for _, c := range plan {
		q, named := find(set, c.Name), find(todo, c.Name) != nil
		up := slices.IndexFunc(own, func(o Candidate) bool { return o.Name == c.Name })
		switch {
		case q == nil:
			wrong = append(wrong, fmt.Sprintf("%s %s (not in the set)", c.Name, c.To))
		case q.To != c.To:
			wrong = append(wrong, fmt.Sprintf("%s %s (the set has %s)", c.Name, c.To, q.To))
		case named && !Picks(s, c):
			wrong = append(wrong, fmt.Sprintf("%s %s (from %s: the spec does not pick it)", c.Name, c.To, c.Release))
		case named && up < 0:
			wrong = append(wrong, fmt.Sprintf("%s %s (from %s: this host's package manager offers no upgrade of it by itself)", c.Name, c.To, c.Release))
		case named && !sameSource(c.Release, own[up].Release):
			wrong = append(wrong, fmt.Sprintf("%s %s (from %s, not from %s, where this host's own upgrade of it comes from)", c.Name, c.To, c.Release, own[up].Release))
		case !named && LeftOut(s, c.Name) != "":
			wrong = append(wrong, fmt.Sprintf("%s %s (%s)", c.Name, c.To, LeftOut(s, c.Name)))
		}
	}
	for _, p := range todo {
		if !slices.ContainsFunc(plan, func(c Candidate) bool { return c.Name == p.Name }) {
			wrong = append(wrong, fmt.Sprintf("not %s %s itself", p.Name, p.To))
		}
	}
	if len(wrong) > 0 {
		return nil, fmt.Errorf("installing the campaign's set here would install %s: stopping before anything is installed", strings.Join(wrong, ", "))
	}
	out := make([]Package, len(plan))
	for i, c := range plan {
		out[i] = c.Package
	}
	sortByName(out)
	return out, nil
}

// sameSource says whether two versions' releases, as the package manager
// lists them ("Debian:12.5/stable, Debian-Security:12/stable-security"),
// share one.
func sameSource(a, b string) bool {
	for _, x := range strings.Split(a, ",") {
		for _, y := range strings.Split(b, ",") {
			if strings.TrimSpace(x) != "" && strings.TrimSpace(x) == strings.TrimSpace(y) {
				return true
			}
		}
	}
	return false
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
	packageName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9+._-]{0,127}(:[a-z0-9-]{1,32})?$`)
	// A version ends in a letter, a digit or '~': apt reads name=version-
	// as a removal.
	packageVersion = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.+~^:_-]{0,126}[A-Za-z0-9~])?$`)
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
