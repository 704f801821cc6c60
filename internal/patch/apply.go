package patch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/kustodian/kustodian/internal/atomicfile"
	"github.com/kustodian/kustodian/internal/rollout"
)

// The files of a patch job, in its directory: the order the agent writes,
// what the job did, and the old packages kept for a rollback.
const (
	OrderFile  = "patch.json"
	ResultFile = "result.json"
	KeepDir    = "keep"
)

// Order is what the agent asks of a patch job: Spec, and Set, the exact
// versions to install (it may be empty), or Resolve: this node is the
// first, and resolves the set.
type Order struct {
	Spec    Spec      `json:"spec"`
	Resolve bool      `json:"resolve,omitempty"`
	Set     []Package `json:"set"`
}

// A patch job's states, in its result.
const (
	StateInstalling = "installing" // the changes are being made: a rollback restores them
	StateInstalled  = "installed"
	StateRestoring  = "restoring" // a rollback began: run again, it restores again
	StateRestored   = "restored"
)

// Result is what a patch job did, written before anything is installed
// and again after, so that a crash or a reboot in between leaves what a
// rollback needs.
type Result struct {
	Manager string `json:"manager"`
	// Resolved: this node resolved Set (it was the first).
	Resolved bool      `json:"resolved,omitempty"`
	Set      []Package `json:"set"`
	// Changes are what this node changed (From: its own version before).
	Changes []Package `json:"changes"`
	State   string    `json:"state"`
	// NotKept are old versions no rollback source holds.
	NotKept []string `json:"notKept,omitempty"`
	// RebootRequired, and why, after the install.
	RebootRequired bool   `json:"rebootRequired,omitempty"`
	RebootWhy      string `json:"rebootWhy,omitempty"`
}

// ReadResult reads a patch job's result; nil, nil when it wrote none.
func ReadResult(dir string) (*Result, error) {
	data, err := os.ReadFile(filepath.Join(dir, ResultFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ResultFile), err)
	}
	return &r, nil
}

func writeResult(dir string, r *Result) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(dir, ResultFile), append(data, '\n'), 0o644)
}

// Apply is a patch job: it installs the order's set (resolving it first
// on the first node), keeping what a rollback needs, and says whether the
// host needs a reboot: when the order allows one, it leaves sentinel for
// the agent to reboot on. Run again (after a reboot, or a crash), it
// finishes what it began and installs nothing twice. say tells the job's
// output what it does.
func Apply(ctx context.Context, m Manager, dir, sentinel string, say func(format string, args ...any)) (*Result, error) {
	data, err := os.ReadFile(filepath.Join(dir, OrderFile))
	if err != nil {
		return nil, err
	}
	var o Order
	if err := json.Unmarshal(data, &o); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, OrderFile), err)
	}
	r, err := ReadResult(dir)
	if err != nil {
		return nil, err
	}
	switch {
	case r != nil && r.State == StateRestoring:
		return r, fmt.Errorf("a rollback of this job began and did not finish: run kustodian patch rollback %s", dir)
	case r == nil || r.State == StateRestored:
		// The first run, or a retry after a rollback.
		if r, err = begin(ctx, m, dir, o, say); err != nil {
			return r, err
		}
	}
	if r.State == StateInstalling {
		if len(r.Changes) > 0 {
			say("installing %d packages with %s: %s", len(r.Changes), m.Name(), describe(r.Changes))
			if err := m.Install(ctx, r.Changes); err != nil {
				return r, err
			}
		}
		after, err := m.Installed(ctx)
		if err != nil {
			return r, err
		}
		for _, p := range r.Changes {
			if after[p.Name] != p.To {
				return r, fmt.Errorf("%s is at %q after the install, not %s", p.Name, after[p.Name], p.To)
			}
		}
		r.State = StateInstalled
		if o.Spec.Reboot != rollout.PatchRebootNever {
			if r.RebootRequired, r.RebootWhy, err = m.RebootRequired(ctx, r.Changes); err != nil {
				return r, err
			}
		}
		if err := writeResult(dir, r); err != nil {
			return r, err
		}
		if r.RebootRequired {
			say("the host needs a reboot: %s", r.RebootWhy)
			if err := touch(sentinel); err != nil {
				return r, err
			}
		}
	}
	say("installed: %s", describe(r.Changes))
	return r, nil
}

// begin resolves or checks the set, keeps the old versions, and writes
// the result before anything is installed; nil when there is nothing to
// install.
func begin(ctx context.Context, m Manager, dir string, o Order, say func(string, ...any)) (*Result, error) {
	say("reading the repositories (%s)", m.Name())
	if err := m.Refresh(ctx); err != nil {
		return nil, err
	}
	r := &Result{Manager: m.Name(), Set: o.Set, State: StateInstalling}
	switch {
	case o.Resolve:
		set, err := Resolve(ctx, m, o.Spec)
		if err != nil {
			return nil, err
		}
		if len(set) > rollout.MaxSet {
			return nil, fmt.Errorf("the updates come to %d packages, more than a campaign's set holds (%d): narrow them with include or exclude, or split the campaign", len(set), rollout.MaxSet)
		}
		r.Set, r.Resolved = set, true
		say("resolved the set of this campaign: %s", describe(set))
	case o.Set == nil:
		return nil, fmt.Errorf("%s: no set to install, and this node is not the one to resolve it", filepath.Join(dir, OrderFile))
	}
	installed, err := m.Installed(ctx)
	if err != nil {
		return nil, err
	}
	if r.Changes, err = Check(ctx, m, o.Spec, r.Set, installed); err != nil {
		return nil, err
	}
	if r.NotKept, err = m.Keep(ctx, filepath.Join(dir, KeepDir), r.Changes); err != nil {
		return nil, err
	}
	if len(r.NotKept) > 0 {
		say("no rollback source holds the old versions of %v: a rollback cannot restore them", r.NotKept)
	}
	return r, writeResult(dir, r)
}

// Rollback restores what a patch job changed, as its result says.
func Rollback(ctx context.Context, m Manager, dir string, say func(string, ...any)) error {
	r, err := ReadResult(dir)
	if err != nil {
		return err
	}
	if r == nil || r.State == StateRestored || len(r.Changes) == 0 {
		say("nothing was installed: nothing to restore")
		return nil
	}
	if err := ValidSet(r.Changes); err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, ResultFile), err)
	}
	say("restoring %d packages with %s: %s", len(r.Changes), m.Name(), describeBack(r.Changes))
	r.State = StateRestoring
	if err := writeResult(dir, r); err != nil {
		return err
	}
	if err := m.Restore(ctx, filepath.Join(dir, KeepDir), r.Changes); err != nil {
		return err
	}
	after, err := m.Installed(ctx)
	if err != nil {
		return err
	}
	for _, p := range r.Changes {
		if after[p.Name] != p.From {
			return fmt.Errorf("%s is at %q after the rollback, not %q", p.Name, after[p.Name], p.From)
		}
	}
	r.State = StateRestored
	return writeResult(dir, r)
}

func touch(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

func describe(ps []Package) string {
	if len(ps) == 0 {
		return "nothing"
	}
	s := ""
	for i, p := range ps {
		if i > 0 {
			s += ", "
		}
		if p.From == "" {
			s += fmt.Sprintf("%s (new) %s", p.Name, p.To)
		} else {
			s += fmt.Sprintf("%s %s → %s", p.Name, p.From, p.To)
		}
	}
	return s
}

func describeBack(ps []Package) string {
	back := make([]Package, len(ps))
	for i, p := range ps {
		back[i] = Package{Name: p.Name, From: p.To, To: p.From}
		if p.From == "" {
			back[i].To = "(removed)"
		}
	}
	return describe(back)
}
