package agent

import (
	"context"
	"log/slog"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/hostfiles"
	"github.com/kustodian/kustodian/internal/jobs"
	"github.com/kustodian/kustodian/internal/metrics"
	"github.com/kustodian/kustodian/internal/rollout"
)

// rollouter is the agent's part in the MaintenanceRollouts, beside its
// maintenance loop: it reads the rollouts and the Nodes' labels, writes
// this node's entries in the rollouts' status, and takes a rollout by
// making a managed job and a maintenance request on the host, which the
// maintenance loop then carries out as any other. Its state is its own.
type rollouter struct {
	cfg      config.Rollouts
	stateDir string
	node     string
	// exe is this program (`kustodian patch` runs a campaign's jobs);
	// sentinel, the host's reboot sentinel.
	exe, sentinel string
	log           *slog.Logger
	now           func() time.Time

	kube  kubernetes.Interface // ConfigMaps, this node's label, Events
	dyn   dynamic.Interface    // the rollouts' status
	jobs  jobs.Store
	files hostfiles.Files
	// event records an Event on this node's Node; poke wakes the
	// maintenance loop (a job was made or withdrawn).
	event func(ctx context.Context, uid types.UID, eventType, reason, message string)
	poke  func()
	// label sets one label of this node's Node (nil removes it).
	label func(ctx context.Context, key string, value *string) error
	// deadlines puts the rollouts' deadlines in the metrics.
	deadlines func(map[string]metrics.Deadline)
	// room is what this node's policy gives the rollouts' nodes (its
	// windows and slots), as the maintenance loop resolved it last.
	room func() rollout.Room

	// The MaintenanceRollouts' metadata and the Nodes' (nil unless
	// rollouts.enabled and the CRD is installed).
	store, nodeStore cache.Store
	// copies: the rollouts as last read whole or written, by name
	// (rolloutread.go), with interest, what their watch needs to know, and
	// reread, those to read again at once; checkedHeld: the job of a
	// rollout read since this node took its lock for it.
	copies      map[string]*rolloutCopy
	interest    rolloutInterest
	reread      map[string]bool
	checkedHeld string
	// refusedAt: when this agent last refused each rollout; wakeAt: when
	// a rollout's next stage opens by itself, or its next read is due;
	// conflict: whether the last entry written met another's write; seen:
	// when this agent first saw each stage of a rollout succeed.
	refusedAt map[string]time.Time
	wakeAt    time.Time
	conflict  bool
	seen      stagesSeen
}

func newRollouter(a *Agent) *rollouter {
	exe, err := os.Executable()
	if err != nil {
		exe = "/usr/bin/kustodian"
	}
	return &rollouter{cfg: a.cfg.Rollouts, stateDir: a.cfg.StateDir, node: a.node, log: a.log, now: a.now, exe: exe, sentinel: a.cfg.RebootSentinel,
		kube: a.kube, dyn: a.caches.dyn, jobs: a.jobs.store, files: a.files, event: a.nodeEvent, poke: a.poke, label: a.nodes.label, deadlines: a.deadlineMetrics,
		room:   func() rollout.Room { return rollout.RoomOf(a.caches.policyCache.resolved) },
		copies: map[string]*rolloutCopy{}, reread: map[string]bool{}, refusedAt: map[string]time.Time{}}
}
