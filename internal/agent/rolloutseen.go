package agent

import (
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

// rolloutStagesFile, in the state directory, keeps when this agent first
// saw each stage of a rollout's revision succeed.
const rolloutStagesFile = "rollout-stages.json"

// stagesSeen is when this agent first saw each stage of the rollouts'
// revisions succeed: the soak of automatic promotion runs from then
// (rollout.Seen), never from a time in the rollout, which the nodes write
// (a compromised one writes finished: 2000-01-01). The agent exits when
// idle and is started again, so what it saw is kept on the host; an agent
// that was not running when a stage succeeded sees it when it starts, and
// waits longer: conservative, as is an observation lost (the file set
// aside), which is only made again later.
type stagesSeen struct {
	path   string
	loaded bool
	revs   map[string]*seenRevision // by rollout UID and revision
	warned string                   // the last failure to read or keep the file, said once
}

// seenRevision is what the agent saw of one rollout's revision.
type seenRevision struct {
	Rollout  string       `json:"rollout"`
	UID      string       `json:"uid"`
	Revision string       `json:"revision"`
	Stages   rollout.Seen `json:"stages"`
}

// observeStages records the stages of the rollouts' revisions that this
// agent sees succeed for the first time, and gives each rollout what was
// seen of it (cachedRollout.seen), for its decisions and the summaries it
// writes. What cannot be kept on the host is said once and kept in memory
// meanwhile: a soak that starts again after a restart is only longer.
func (a *Agent) observeStages(rs []cachedRollout, nodes []rollout.NodeFacts) {
	if a.stagesSeen.path == "" {
		a.stagesSeen.path = filepath.Join(a.cfg.StateDir, rolloutStagesFile)
	}
	err := a.stagesSeen.observe(rs, nodes, a.now())
	switch {
	case err == nil:
		a.stagesSeen.warned = ""
	case err.Error() != a.stagesSeen.warned:
		a.stagesSeen.warned = err.Error()
		a.log.Warn("when the rollouts' stages succeeded is not kept on this host (a restarted agent soaks them again, from when it sees them)", "err", err)
	}
}

// observe records, at now, each stage of rs's revisions that has
// succeeded and was not seen to before; forgets the revisions no rollout
// runs any more (a deleted rollout, a changed script); keeps the file when
// something changed; and sets each rollout's seen.
func (s *stagesSeen) observe(rs []cachedRollout, nodes []rollout.NodeFacts, now time.Time) error {
	var errs []error
	if !s.loaded {
		errs = append(errs, s.load())
	}
	changed := false
	live := map[string]bool{}
	for i := range rs {
		r := rs[i].r
		rev := rollout.Revision(r.Namespace, r.Name, r.Spec)
		key := string(r.UID) + "/" + rev
		live[key] = true
		done, err := rollout.SucceededStages(r, nodes)
		if err != nil {
			continue // takeRollout says why it cannot decide
		}
		e := s.revs[key]
		for _, k := range done {
			if e == nil {
				e = &seenRevision{Rollout: r.Name, UID: string(r.UID), Revision: rev, Stages: rollout.Seen{}}
				s.revs[key] = e
			}
			if _, ok := e.Stages[k]; !ok {
				e.Stages[k] = now.UTC()
				changed = true
			}
		}
		rs[i].seen = rollout.Seen{}
		if e != nil {
			rs[i].seen = e.Stages
		}
	}
	for key := range s.revs {
		if !live[key] {
			delete(s.revs, key)
			changed = true
		}
	}
	if changed {
		errs = append(errs, s.save())
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
	var list []*seenRevision
	if err := json.Unmarshal(b, &list); err != nil {
		_ = os.Rename(s.path, s.path+".corrupt")
		return fmt.Errorf("%s is corrupt (%v); kept as %s.corrupt, the stages that succeeded are seen again from now", s.path, err, s.path)
	}
	for _, e := range list {
		if e != nil && e.Stages != nil {
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
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(s.path), 0o700); err != nil {
		return fmt.Errorf("keeping %s: %w", s.path, err)
	}
	return atomicfile.Write(s.path, append(b, '\n'), 0o600)
}
