package patch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// host is a package manager of its own rules, as the test states them: a
// repository of versions per package (the last one the newest), each
// version's needs ("name=version"), and what is installed.
type host struct {
	repo      map[string][]string
	release   map[string]string   // "name=version" → its release; default "main"
	needs     map[string][]string // "name=version" → "name=version" it needs
	installed map[string]string
	fail      map[string]bool // "name=version" whose install fails
	installs  int
	reboot    bool
}

func (h *host) Name() string                  { return "fake" }
func (h *host) Refresh(context.Context) error { return nil }

// Updates: the newest version of each installed package, but one of a
// backports release, which the host upgrades to only when told (as apt's
// pin priority 100 has it).
func (h *host) Updates(ctx context.Context) ([]Candidate, error) {
	var up []Package
	for name, cur := range h.installed {
		vs := slices.DeleteFunc(slices.Clone(h.repo[name]), func(v string) bool { return strings.Contains(h.release[name+"="+v], "backports") })
		if len(vs) > 0 && vs[len(vs)-1] > cur {
			up = append(up, Package{Name: name, To: vs[len(vs)-1]})
		}
	}
	return h.Simulate(ctx, up)
}

func (h *host) Newer(_ context.Context, a, b string) (bool, error) { return a > b, nil }

func (h *host) Simulate(_ context.Context, set []Package) ([]Candidate, error) {
	ps, err := h.plan(set)
	var out []Candidate
	for _, p := range ps {
		rel := h.release[p.Name+"="+p.To]
		if rel == "" {
			rel = "main"
		}
		out = append(out, Candidate{Package: p, Release: rel, Security: IsSecurity(rel)})
	}
	return out, err
}

func (h *host) plan(set []Package) ([]Package, error) {
	var out []Package
	var add func(name, ver string) error
	add = func(name, ver string) error {
		if h.installed[name] == ver || slices.ContainsFunc(out, func(p Package) bool { return p.Name == name }) {
			return nil
		}
		if !slices.Contains(h.repo[name], ver) {
			return fmt.Errorf("version %q for %q was not found", ver, name)
		}
		if h.installed[name] > ver {
			return fmt.Errorf("%s would be downgraded", name)
		}
		out = append(out, Package{Name: name, From: h.installed[name], To: ver})
		for _, n := range h.needs[name+"="+ver] {
			dn, dv, _ := strings.Cut(n, "=")
			if h.installed[dn] < dv {
				if err := add(dn, dv); err != nil {
					return err
				}
			}
		}
		return nil
	}
	for _, p := range set {
		if err := add(p.Name, p.To); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (h *host) Install(_ context.Context, set []Package) error {
	plan, err := h.plan(set)
	if err != nil {
		return err
	}
	h.installs++
	for _, p := range plan {
		h.installed[p.Name] = p.To
		if h.fail[p.Name+"="+p.To] {
			return fmt.Errorf("%s: post-installation script returned error exit status 1", p.Name)
		}
	}
	return nil
}

func (h *host) Installed(context.Context) (map[string]string, error) {
	out := map[string]string{}
	for k, v := range h.installed {
		out[k] = v
	}
	return out, nil
}

func (h *host) Keep(context.Context, string, []Package) ([]string, error) { return nil, nil }

func (h *host) Restore(_ context.Context, _ string, changes []Package) error {
	for _, p := range changes {
		if p.From == "" {
			delete(h.installed, p.Name)
		} else {
			h.installed[p.Name] = p.From
		}
	}
	return nil
}

func (h *host) RebootRequired(context.Context, []Package) (bool, string, error) {
	return h.reboot, "the kernel", nil
}

func order(t *testing.T, o string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, OrderFile), []byte(o), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func quiet(string, ...any) {}

// The first node resolves the set; a later node installs exactly it, even
// when the repository has a newer version by then; a version gone, or a
// need outside the set, stops a node before it installs anything.
func TestTheFleetInstallsExactlyWhatTheFirstNodeResolved(t *testing.T) {
	ctx := context.Background()
	repo := map[string][]string{"app": {"1", "2"}, "libapp": {"1", "2"}, "kubelet": {"1", "2"}, "tool": {"1"}}
	needs := map[string][]string{"app=2": {"libapp=2"}}
	canary := &host{repo: repo, needs: needs, installed: map[string]string{"app": "1", "libapp": "1", "kubelet": "1", "tool": "1"}}
	dir := order(t, `{"spec":{"updates":"all","exclude":["kube*"]},"resolve":true}`)
	r, err := Apply(ctx, canary, dir, "", quiet)
	if err != nil {
		t.Fatal(err)
	}
	want := []Package{pkg("app", "1", "2"), pkg("libapp", "1", "2")}
	if !r.Resolved || !slices.Equal(r.Set, want) || !slices.Equal(r.Changes, want) || r.State != StateInstalled {
		t.Fatalf("the canary: %+v, want resolved and installed %v (kubelet excluded)", r, want)
	}
	if canary.installed["kubelet"] != "1" {
		t.Error("the canary upgraded an excluded package")
	}

	// v3 is published mid-campaign: a later node installs the set's 2.
	repo["app"] = append(repo["app"], "3")
	needs["app=3"] = []string{"libapp=2"}
	later := &host{repo: repo, needs: needs, installed: map[string]string{"app": "1", "libapp": "2", "kubelet": "1"}}
	set := `{"spec":{"updates":"all","exclude":["kube*"]},"set":[{"name":"app","from":"1","to":"2"},{"name":"libapp","from":"1","to":"2"}]}`
	r, err = Apply(ctx, later, order(t, set), "", quiet)
	if err != nil {
		t.Fatal(err)
	}
	if later.installed["app"] != "2" || r.Resolved || !slices.Equal(r.Changes, []Package{pkg("app", "1", "2")}) {
		t.Errorf("a later node: installed %v, result %+v; want app 2 only (libapp already at 2)", later.installed, r)
	}

	// A version the repositories no longer have.
	gone := &host{repo: map[string][]string{"app": {"1", "3"}, "libapp": {"1", "2"}}, installed: map[string]string{"app": "1", "libapp": "1"}}
	if _, err := Apply(ctx, gone, order(t, set), "", quiet); err == nil || !strings.Contains(err.Error(), `"2" for "app"`) || gone.installs != 0 {
		t.Errorf("a version gone: %v, %d installs; want a clear error and nothing installed", err, gone.installs)
	}
	// A set whose name is an option to apt-get (a compromised first node).
	evil := `{"spec":{},"set":[{"name":"-oAPT::Update::Pre-Invoke::=touch /tmp/x","to":"1"}]}`
	if _, err := Apply(ctx, gone, order(t, evil), "", quiet); err == nil || !strings.Contains(err.Error(), "not a package name") || gone.installs != 0 {
		t.Errorf("a name that is an option: %v, want it refused before anything runs", err)
	}
	evil = `{"spec":{},"set":[{"name":"app","to":"--allow-unauthenticated"}]}`
	if _, err := Apply(ctx, gone, order(t, evil), "", quiet); err == nil || !strings.Contains(err.Error(), "not a version") {
		t.Errorf("a version that is an option: %v, want it refused", err)
	}
	// A set that a lying first node made: what the spec leaves out, a
	// package new to the host named outright, a version not newer.
	liar := &host{repo: map[string][]string{"app": {"1", "2"}, "kubelet": {"1", "2"}, "backdoor": {"1"}, "vim": {"1", "2"}},
		installed: map[string]string{"app": "1", "kubelet": "1", "vim": "2"}}
	for _, c := range []struct{ set, want string }{
		{`{"spec":{"exclude":["kube*"]},"set":[{"name":"kubelet","from":"1","to":"2"}]}`, "kubelet 2 (from main: the spec does not pick it)"},
		{`{"spec":{"updates":"security"},"set":[{"name":"app","from":"1","to":"2"}]}`, "app 2 (from main: the spec does not pick it)"},
	} {
		if _, err := Apply(ctx, liar, order(t, c.set), "", quiet); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("a set the spec does not allow: %v, want an error naming %q", err, c.want)
		}
	}
	// A version the host has only from backports, which its own upgrades
	// do not come from.
	back := &host{repo: map[string][]string{"app": {"1", "2", "9"}}, release: map[string]string{"app=9": "stable-backports"}, installed: map[string]string{"app": "1"}}
	if _, err := Apply(ctx, back, order(t, `{"spec":{},"set":[{"name":"app","from":"1","to":"9"}]}`), "", quiet); err == nil ||
		!strings.Contains(err.Error(), "app 9 (from stable-backports, not from main") || back.installs != 0 {
		t.Errorf("a version from backports: %v, %d installs; want it refused, nothing installed", err, back.installs)
	}
	lie := `{"spec":{},"set":[{"name":"backdoor","to":"1"},{"name":"vim","from":"1","to":"1"},{"name":"zsh","from":"1","to":"2"}]}`
	if r, err := Apply(ctx, liar, order(t, lie), "", quiet); err != nil || len(r.Changes) != 0 || liar.installed["backdoor"] != "" || liar.installs != 0 {
		t.Errorf("a new package named outright, a version older than installed, a package not here: %v, %+v, installed %v; want nothing installed", err, r, liar.installed)
	}
	if _, err := Apply(ctx, liar, order(t, `{"spec":{}}`), "", quiet); err == nil || !strings.Contains(err.Error(), "no set") {
		t.Errorf("an order with neither a set nor resolve: %v, want an error", err)
	}
	// A node whose set would pull in more than the canary's.
	more := &host{repo: repo, needs: map[string][]string{"app=2": {"libapp=2", "tool=1"}}, installed: map[string]string{"app": "1", "libapp": "1"}}
	if _, err := Apply(ctx, more, order(t, set), "", quiet); err == nil || !strings.Contains(err.Error(), "tool 1 (not in the set)") || more.installs != 0 {
		t.Errorf("more than the set: %v, %d installs; want an error naming tool and nothing installed", err, more.installs)
	}
	// A set that needs what the spec excludes.
	dep := &host{repo: repo, needs: map[string][]string{"app=3": {"kubelet=2"}}, installed: map[string]string{"app": "1", "kubelet": "1"}}
	if _, err := Apply(ctx, dep, order(t, `{"spec":{"exclude":["kubelet"]},"resolve":true}`), "", quiet); err == nil || !strings.Contains(err.Error(), "kubelet 2") || !strings.Contains(err.Error(), "exclude") {
		t.Errorf("a need excluded: %v, want an error naming kubelet and the exclude", err)
	}
}

// Security only picks the security releases; run again after a reboot,
// the job installs nothing twice; a rollback restores the versions before.
func TestAPatchJobRunsAgainAndRollsBack(t *testing.T) {
	ctx := context.Background()
	h := &host{repo: map[string][]string{"openssl": {"1", "2"}, "vim": {"1", "2"}}, release: map[string]string{"openssl=2": "Debian-Security:12/stable-security"},
		installed: map[string]string{"openssl": "1", "vim": "1"}, reboot: true}
	dir := order(t, `{"spec":{"updates":"security","reboot":"ifRequired"},"resolve":true}`)
	sentinel := filepath.Join(t.TempDir(), "reboot-required")
	r, err := Apply(ctx, h, dir, sentinel, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.Changes, []Package{pkg("openssl", "1", "2")}) || h.installed["vim"] != "1" {
		t.Errorf("security only: %+v, installed %v", r.Changes, h.installed)
	}
	if _, err := os.Stat(sentinel); err != nil || !r.RebootRequired {
		t.Errorf("the host needs a reboot: sentinel %v, result %v", err, r.RebootRequired)
	}
	// After the reboot the job runs again.
	if r, err = Apply(ctx, h, dir, sentinel, quiet); err != nil || h.installs != 1 || !slices.Equal(r.Changes, []Package{pkg("openssl", "1", "2")}) {
		t.Errorf("run again: %v, %d installs, changes %v; want the first run's changes and no second install", err, h.installs, r.Changes)
	}
	if err := Rollback(ctx, h, dir, quiet); err != nil {
		t.Fatal(err)
	}
	if h.installed["openssl"] != "1" {
		t.Errorf("after the rollback openssl is %s, want 1", h.installed["openssl"])
	}

	// A failed install (a postinst) leaves a result a rollback restores,
	// a new package removed.
	f := &host{repo: map[string][]string{"app": {"1", "4"}, "newdep": {"1"}}, needs: map[string][]string{"app=4": {"newdep=1"}},
		installed: map[string]string{"app": "1"}, fail: map[string]bool{"app=4": true}}
	fdir := order(t, `{"spec":{},"resolve":true}`)
	if _, err := Apply(ctx, f, fdir, "", quiet); err == nil || !strings.Contains(err.Error(), "post-installation") {
		t.Fatalf("a failing postinst: %v", err)
	}
	if err := Rollback(ctx, f, fdir, quiet); err != nil {
		t.Fatal(err)
	}
	if f.installed["app"] != "1" || f.installed["newdep"] != "" {
		t.Errorf("after the rollback: %v, want app 1 and newdep gone", f.installed)
	}
}
