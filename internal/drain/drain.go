// Package drain cordons, drains and uncordons a node with
// k8s.io/kubectl/pkg/drain, with every setting explicit (docs/design.md, "Drain").
// kubectl's Helper chooses which pods must leave and evicts them; this
// package drives the evictions itself so that it can say, at every moment,
// which pods are left and what blocks them, and so that it reacts to pod
// deletions through a watch instead of polling each pod every second.
package drain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	appsv1 "k8s.io/client-go/kubernetes/typed/apps/v1"
	kdrain "k8s.io/kubectl/pkg/drain"

	"github.com/kustodian/kustodian/internal/config"
)

// Progress is the drain's state after each change.
type Progress struct {
	Left    int    // pods that must still leave the node; -1 while not known
	Evicted int    // pods this drain has evicted so far
	Message string // one line: "draining: 3 pods left, shop/web-1 blocked by PDB web"
}

// Drainer drains one node.
type Drainer struct {
	Client kubernetes.Interface
	// Pods, when set, lists, watches and evicts the node's pods instead of
	// Client: the kubelet's identity, which the API server holds to the
	// node's own pods (drain.kubeletKubeconfig).
	Pods     kubernetes.Interface
	Settings config.Drain
	Log      *slog.Logger
	// Escalation, when set, deletes what a PodDisruptionBudget holds once
	// drain.timeout has passed (escalate.go).
	Escalation *Escalation
}

// podsClient is the client of the node's pods.
func (d *Drainer) podsClient() kubernetes.Interface {
	if d.Pods == nil {
		return d.Client
	}
	return kubeletClient{Interface: d.Pods, apps: d.Client}
}

// kubeletClient is the kubelet's identity for kubectl's drain helper, which
// also reads the DaemonSets of the pods it skips: a kubelet may not, so
// those reads go through the agent's own client.
type kubeletClient struct {
	kubernetes.Interface
	apps kubernetes.Interface
}

func (c kubeletClient) AppsV1() appsv1.AppsV1Interface { return c.apps.AppsV1() }

// apiRetry is how long a drain waits after its watch or list of the
// node's pods failed.
var apiRetry = time.Second

// maxParallelEvictions bounds the controllers whose pods are evicted at once.
const maxParallelEvictions = 16

// ErrTimeout is returned when drain.timeout elapses.
var ErrTimeout = errors.New("drain timed out")

func (d *Drainer) helper(ctx context.Context) *kdrain.Helper {
	out := slogWriter{d.Log, slog.LevelInfo}
	errOut := slogWriter{d.Log, slog.LevelWarn}
	return &kdrain.Helper{
		Ctx:                             ctx,
		Client:                          d.podsClient(),
		Force:                           d.Settings.Force,
		GracePeriodSeconds:              -1, // each pod's own grace period; 0 would kill at once
		IgnoreAllDaemonSets:             true,
		DeleteEmptyDirData:              d.Settings.DeleteEmptyDirData,
		Timeout:                         d.Settings.Timeout,
		PodSelector:                     d.Settings.PodSelector,
		SkipWaitForDeleteTimeoutSeconds: int(d.Settings.SkipWaitForDeleteTimeout.Seconds()),
		EvictErrorRetryDelay:            d.Settings.EvictErrorRetryDelay,
		Out:                             out,
		ErrOut:                          errOut,
	}
}

// podState is what the drain knows of one pod that must leave.
type podState struct {
	key        string // namespace/name
	controller string // kind/namespace/name of its controller, or ""
	evicted    bool   // the Eviction API accepted it (or escalation deleted it); now waiting for it to go
	blocked    string // why the last eviction was refused
	pdb        bool   // a PodDisruptionBudget refused its eviction in this drain
	uid        types.UID
}

// drainRun is what one drain knows across its rounds (escalate.go).
type drainRun struct {
	pods      map[types.UID]*podState
	disrupted *controllers
	refused   []string // pods kubectl's filters refuse to delete, as of the last step
}

// Drain evicts every pod that must leave node and returns once they are
// gone. PDB refusals (429) are retried after EvictErrorRetryDelay; pods that
// can never be evicted (no controller without drain.force, for example) are
// reported in the progress message and retried, until ctx ends or
// drain.timeout elapses (ErrTimeout). progress is called on every change of
// the message or of the count of pods evicted.
//
// It returns the controllers (kind/namespace/name) whose pods it evicted, in
// the order of their first eviction, for health.workloadsRecovered.
func (d *Drainer) Drain(ctx context.Context, node string, progress func(Progress)) ([]string, error) {
	run := &drainRun{pods: map[types.UID]*podState{}, disrupted: &controllers{}}
	err := d.drain(ctx, node, progress, run)
	if errors.Is(err, ErrTimeout) && d.Escalation != nil && ctx.Err() == nil {
		var deleted int
		if deleted, err = d.escalate(ctx, run); err == nil && deleted > 0 {
			err = d.drain(ctx, node, progress, run)
		} else if err == nil {
			err = fmt.Errorf("%w after %s", ErrTimeout, d.Settings.Timeout)
		}
	}
	if errors.Is(err, ErrTimeout) {
		err = &StuckError{Pods: run.left(), Err: err}
	}
	return run.disrupted.list, err
}

// controllers is an ordered set of controller references.
type controllers struct {
	seen    map[string]bool
	list    []string
	evicted int // pods evicted
}

func (c *controllers) add(ref string) {
	if ref == "" || c.seen[ref] {
		return
	}
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	c.seen[ref] = true
	c.list = append(c.list, ref)
}

func (d *Drainer) drain(ctx context.Context, node string, progress func(Progress), run *drainRun) error {
	disrupted := run.disrupted
	if d.Settings.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, d.Settings.Timeout, ErrTimeout)
		defer cancel()
	}
	h := d.helper(ctx)
	pods := run.pods
	var last Progress
	report := func(p Progress) {
		p.Evicted = disrupted.evicted
		if p.Message != last.Message || p.Evicted != last.Evicted {
			last = p
			progress(p)
		}
	}

	left := -1 // not yet known
	// unreachable reports a failed watch or list and waits before the next
	// try: the API server away (restarting, an outage) fails no drain;
	// only drain.timeout or the end of ctx do.
	unreachable := func(err error) error {
		report(Progress{Left: left, Message: "draining: " + firstLine(err.Error()) + "; trying again"})
		d.Log.Warn("draining: the pods cannot be read; trying again", "node", node, "err", err, "retry_in", apiRetry)
		t := time.NewTimer(apiRetry)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return d.ctxErr(ctx, ctx.Err())
		case <-t.C:
			return nil
		}
	}
	for {
		// A watch first, then the list: a deletion between the two is not missed.
		w, err := d.podsClient().CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
		})
		if err != nil && ctx.Err() == nil {
			if err := unreachable(fmt.Errorf("watching the pods of node %s: %w", node, err)); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return d.ctxErr(ctx, err)
		}
		done, retryIn, err := d.step(ctx, h, node, run, report)
		if err != nil && ctx.Err() == nil {
			w.Stop()
			if err := unreachable(err); err != nil {
				return err
			}
			continue
		}
		if err != nil || done {
			w.Stop()
			return d.ctxErr(ctx, err)
		}
		left = len(pods)
		// Wait for a pod of the node to change, or for the retry delay of a
		// refused eviction.
		var retry <-chan time.Time
		var timer *time.Timer
		if retryIn > 0 {
			timer = time.NewTimer(retryIn)
			retry = timer.C
		}
		select {
		case <-ctx.Done():
		case <-w.ResultChan():
		case <-retry:
		}
		w.Stop()
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return d.ctxErr(ctx, ctx.Err())
		}
	}
}

func (d *Drainer) ctxErr(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	if cause := context.Cause(ctx); errors.Is(cause, ErrTimeout) {
		return fmt.Errorf("%w after %s", ErrTimeout, d.Settings.Timeout)
	}
	return err
}

// step lists the pods that must leave, evicts those not yet evicted, and
// reports. It returns done when none is left, and when to retry refused
// evictions.
func (d *Drainer) step(ctx context.Context, h *kdrain.Helper, node string, run *drainRun, report func(Progress)) (done bool, retryIn time.Duration, err error) {
	pods, disrupted := run.pods, run.disrupted
	list, errs := h.GetPodsForDeletion(node)
	if list == nil {
		return false, 0, fmt.Errorf("listing the pods of node %s: %w", node, errors.Join(errs...))
	}
	// Pods that kubectl's filters refuse to delete (no controller, local
	// storage) block the drain until an admin acts or the settings change.
	var refused []string
	for _, e := range errs {
		refused = append(refused, refusedPods(e)...)
	}
	run.refused = refused

	current := map[types.UID]bool{}
	evictable := list.Pods()
	var todo []int // indexes into evictable of pods to evict now
	for i := range evictable {
		pod := &evictable[i]
		current[pod.UID] = true
		st := pods[pod.UID]
		if st == nil {
			st = &podState{key: pod.Namespace + "/" + pod.Name, uid: pod.UID}
			if c := metav1.GetControllerOf(pod); c != nil {
				st.controller = c.Kind + "/" + pod.Namespace + "/" + c.Name
			}
			pods[pod.UID] = st
		}
		if !st.evicted { // evicted ones are accepted; waiting for them to go
			todo = append(todo, i)
		}
	}
	// Pods of one controller are evicted one after the other: they usually
	// share a PodDisruptionBudget, and concurrent evictions under one budget
	// conflict on its status and make the API server back off for 500 ms.
	// Pods of different controllers go side by side.
	evictErrs := make([]error, len(todo))
	groups := map[string][]int{} // controller UID -> positions in todo
	for j, i := range todo {
		key := string(evictable[i].UID)
		if ref := metav1.GetControllerOf(&evictable[i]); ref != nil {
			key = string(ref.UID)
		}
		groups[key] = append(groups[key], j)
	}
	sem := make(chan struct{}, maxParallelEvictions)
	var wg sync.WaitGroup
	for _, group := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			for _, j := range group {
				evictErrs[j] = h.EvictPod(evictable[todo[j]], policyv1.SchemeGroupVersion)
				if apierrors.IsTooManyRequests(evictErrs[j]) {
					// The budget is spent: the others would be refused too.
					for _, k := range group[slices.Index(group, j)+1:] {
						evictErrs[k] = evictErrs[j]
					}
					return
				}
			}
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		return false, 0, ctx.Err()
	}
	for j, i := range todo {
		st, err := pods[evictable[i].UID], evictErrs[j]
		switch {
		case err == nil || apierrors.IsNotFound(err):
			st.evicted, st.blocked, st.pdb = true, "", false
			disrupted.add(st.controller)
			disrupted.evicted++
			d.Log.Info("evicted pod", "pod", st.key)
		case apierrors.IsTooManyRequests(err):
			st.blocked, st.pdb = "blocked by "+pdbOf(err), true
			retryIn = d.Settings.EvictErrorRetryDelay
		default:
			// Forbidden (a PDB with negative budget), several PDBs, a
			// transient server error: say so and try again after the delay.
			// (A budget that refused it before still holds it: an answer
			// cut short says nothing of the budget.)
			st.blocked = "eviction failed: " + firstLine(err.Error())
			retryIn = d.Settings.EvictErrorRetryDelay
		}
	}
	for uid := range pods {
		if !current[uid] {
			delete(pods, uid) // gone (or replaced by a pod with a new UID)
		}
	}
	if len(refused) > 0 && retryIn == 0 {
		retryIn = d.Settings.EvictErrorRetryDelay
	}
	left := len(pods) + len(refused)
	if left == 0 {
		report(Progress{Left: 0, Message: "drained"})
		return true, 0, nil
	}
	report(Progress{Left: left, Message: summary(pods, refused)})
	return false, retryIn, nil
}
