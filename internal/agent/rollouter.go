package agent

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/hostfiles"
	"github.com/kustodian/kustodian/internal/jobs"
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
	log      *slog.Logger
	now      func() time.Time

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

	// The MaintenanceRollouts and the Nodes' metadata (nil unless
	// rollouts.enabled and the CRD is installed).
	store, nodeStore cache.Store
	// written: the rollouts this agent wrote, until the cache has them;
	// refusedAt: when this agent last refused each rollout; wakeAt: when
	// a rollout's next stage opens by itself; conflict: whether the last
	// entry written met another's write; seen: when this agent first saw
	// each stage of a rollout succeed.
	written   map[string]*unstructured.Unstructured
	refusedAt map[string]time.Time
	wakeAt    time.Time
	conflict  bool
	seen      stagesSeen
}

func newRollouter(a *Agent) *rollouter {
	return &rollouter{cfg: a.cfg.Rollouts, stateDir: a.cfg.StateDir, node: a.node, log: a.log, now: a.now,
		kube: a.kube, dyn: a.caches.dyn, jobs: a.jobs.store, files: a.files, event: a.nodeEvent, poke: a.poke, label: a.nodes.label,
		written: map[string]*unstructured.Unstructured{}, refusedAt: map[string]time.Time{}}
}
