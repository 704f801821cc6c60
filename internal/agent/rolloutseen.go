package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/kustodian/kustodian/internal/atomicfile"
	"github.com/kustodian/kustodian/internal/rollout"
)

// rolloutStagesFile, in the state directory, keeps what this agent saw of
// the rollouts: when it first saw each stage of a revision succeed, and
// which nodes had taken a revision when this node could first take it.
const rolloutStagesFile = "rollout-stages.json"

// stagesSeen is what this agent saw of the rollouts' revisions, its own
// observation, never a time or an order read from the rollout (the nodes
// write their entries, and a compromised one writes finished: 2000-01-01,
// or takes a place out of turn):
//   - when it first saw each stage succeed: the soak of automatic
//     promotion runs from then (rollout.Seen);
//   - the nodes that had taken a revision when this node could first take
//     it (rollout.Decide's before): places they hold in a count stage were
//     taken before this node could ask, and it defers to them; a node that
//     took a place later stands in for no one.
//
// The agent exits when idle and is started again, so what it saw is kept
// on the host; an agent that was not running when a stage succeeded sees
// it when it starts, and waits longer: conservative, as is an observation
// lost (the file set aside), which is only made again later.
type stagesSeen struct {
	path    string
	loaded  bool
	loadErr error // a failure to read the file, said by the next observe
	// since is when this node's Node began to say that its host runs
	// rollouts (kustodian.io/rollouts), as this agent saw it: a rollout
	// created after it found the node able to take it from the start, and
	// no node had taken it before. The zero time: from before any rollout
	// (the label was there when an agent that kept no time found it).
	since      time.Time
	sinceKnown bool
	dirty      bool                     // since changed and is not kept yet
	revs       map[string]*seenRevision // by rollout UID and revision
	warned     string                   // the last failure to read or keep the file, said once
}

// rolloutSettle is how long after this node began to run rollouts the
// nodes that take a rollout still count as having taken it before it
// could: another agent may not have seen this node's label yet when it
// claimed its place, in turn as it saw the nodes.
const rolloutSettle = 30 * time.Second

// seenFile is the file's content.
type seenFile struct {
	RolloutsSince *time.Time      `json:"rolloutsSince,omitempty"`
	Revisions     []*seenRevision `json:"revisions"`
}

// seenRevision is what the agent saw of one rollout's revision.
type seenRevision struct {
	Rollout  string       `json:"rollout"`
	UID      string       `json:"uid"`
	Revision string       `json:"revision"`
	Stages   rollout.Seen `json:"stages,omitempty"`
	// Before are the nodes that had taken the revision when this node
	// could first take it; absent until then.
	Before *[]string `json:"before,omitempty"`
	// Unselected: the agent saw the revision while its node could not
	// take it (the rollout did not select it then).
	Unselected bool `json:"unselected,omitempty"`
}

// rolloutsRun records what the agent found on its Node: has, whether the
// Node said already that its host runs rollouts. Without it, the agent
// labels the Node now, and the rollouts there now came before this node
// could take them. With it and no time kept (the first run of this
// version, a state directory lost), the node could take them all along.
func (s *stagesSeen) rolloutsRun(has bool, now time.Time) {
	if !s.loaded {
		s.loadErr = s.load()
	}
	switch {
	case !has:
		s.since, s.sinceKnown, s.dirty = now.UTC(), true, true
	case !s.sinceKnown:
		s.since, s.sinceKnown, s.dirty = time.Time{}, true, true
	}
}

// onTime reports whether this node could take revision rev of rollout r
// from when it appeared: its host ran rollouts before r was made, or this
// agent had seen an earlier revision of r while its node could take it (a
// new script came after that).
func (s *stagesSeen) onTime(r *rollout.MaintenanceRollout, rev string) bool {
	if !s.since.After(r.CreationTimestamp.Time) {
		return true
	}
	for _, e := range s.revs {
		if e.UID == string(r.UID) && e.Revision != rev && e.Before != nil {
			return true
		}
	}
	return false
}

// observeStages records what this agent sees of the rollouts for the first
// time (stagesSeen), and gives each rollout what was seen of it
// (cachedRollout.seen and .before), for its decisions and the summaries it
// writes. What cannot be kept on the host is said once and kept in memory
// meanwhile: a soak that starts again after a restart is only longer.
func (ro *rollouter) observeStages(rs []cachedRollout, nodes []rollout.NodeFacts) {
	err := ro.seenRollouts().observe(rs, nodes, ro.node, ro.now())
	switch {
	case err == nil:
		ro.seen.warned = ""
	case err.Error() != ro.seen.warned:
		ro.seen.warned = err.Error()
		ro.log.Warn("what this agent saw of the rollouts is not kept on this host (a restarted agent soaks their stages again, from when it sees them)", "err", err)
	}
}

// seenRollouts is what this agent saw of the rollouts, kept in its state
// directory.
func (ro *rollouter) seenRollouts() *stagesSeen {
	if ro.seen.path == "" {
		ro.seen.path = filepath.Join(ro.stateDir, rolloutStagesFile)
	}
	return &ro.seen
}

// observe records, at now, each stage of rs's revisions that has
// succeeded and was not seen to before, and the nodes that had taken each
// revision when node self could first take it; forgets the revisions no
// rollout runs any more (a deleted rollout, a changed script); keeps the
// file when something changed; and sets each rollout's seen and before.
func (s *stagesSeen) observe(rs []cachedRollout, nodes []rollout.NodeFacts, self string, now time.Time) error {
	var errs []error
	if !s.loaded {
		s.loadErr = s.load()
	}
	errs, s.loadErr = append(errs, s.loadErr), nil
	if !s.sinceKnown {
		s.rolloutsRun(false, now) // not known: from now, so that what exists came before
	}
	changed := s.dirty
	live := map[string]bool{}
	for i := range rs {
		r := rs[i].r
		rev := rollout.Revision(r.Namespace, r.Name, r.Spec)
		key := string(r.UID) + "/" + rev
		live[key] = true
		look, err := rollout.Observe(r, nodes, self)
		if err != nil {
			continue // takeRollout says why it cannot decide
		}
		e := s.revs[key]
		if e == nil {
			e = &seenRevision{Rollout: r.Name, UID: string(r.UID), Revision: rev}
			s.revs[key] = e
			changed = true
		}
		for _, k := range look.Succeeded {
			if e.Stages == nil {
				e.Stages = rollout.Seen{}
			}
			if _, ok := e.Stages[k]; !ok {
				e.Stages[k] = now.UTC()
				changed = true
			}
		}
		switch {
		case e.Before != nil && look.Eligible && !s.since.IsZero() && now.Before(s.since.Add(rolloutSettle)):
			// Settling: a node that claims now may not have seen this
			// node's label yet.
			for _, n := range look.Takers {
				if !slices.Contains(*e.Before, n) {
					*e.Before, changed = append(*e.Before, n), true
				}
			}
		case e.Before != nil:
		case look.Eligible:
			before := []string{}
			if e.Unselected || !s.onTime(r, rev) {
				before = look.Takers
			}
			e.Before, changed = &before, true
		case !e.Unselected:
			e.Unselected, changed = true, true
		}
		rs[i].seen = rollout.Seen{}
		if e.Stages != nil {
			rs[i].seen = e.Stages
		}
		rs[i].before = nil
		if e.Before != nil {
			rs[i].before = *e.Before
		}
	}
	for key := range s.revs {
		if !live[key] {
			delete(s.revs, key)
			changed = true
		}
	}
	if changed {
		err := s.save()
		s.dirty = err != nil
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// load reads what an earlier run kept. A file that cannot be decoded is
// set aside (renamed *.corrupt): the stages are seen again, later.
func (s *stagesSeen) load() error {
	s.loaded, s.revs = true, map[string]*seenRevision{}
	b, err := os.ReadFile(s.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("reading %s: %w", s.path, err)
	}
	var f seenFile
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte("[")) {
		err = json.Unmarshal(b, &f.Revisions) // kept by an earlier agent: the stages alone
	} else {
		err = json.Unmarshal(b, &f)
	}
	if err != nil {
		_ = os.Rename(s.path, s.path+".corrupt")
		return fmt.Errorf("%s is corrupt (%v); kept as %s.corrupt, what it kept is seen again from now", s.path, err, s.path)
	}
	if !s.sinceKnown && f.RolloutsSince != nil {
		s.since, s.sinceKnown = *f.RolloutsSince, true
	}
	for _, e := range f.Revisions {
		if e != nil {
			s.revs[e.UID+"/"+e.Revision] = e
		}
	}
	return nil
}

// save keeps what was seen, whole or not at all.
func (s *stagesSeen) save() error {
	list := make([]*seenRevision, 0, len(s.revs))
	for _, e := range s.revs {
		list = append(list, e)
	}
	slices.SortFunc(list, func(x, y *seenRevision) int {
		return strings.Compare(x.Rollout+"/"+x.UID+"/"+x.Revision, y.Rollout+"/"+y.UID+"/"+y.Revision)
	})
	f := seenFile{Revisions: list}
	if s.sinceKnown {
		since := s.since
		f.RolloutsSince = &since
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return fmt.Errorf("keeping %s: %w", s.path, err)
	}
	return atomicfile.Write(s.path, append(b, '\n'), 0o600)
}
