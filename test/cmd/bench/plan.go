package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"sort"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/policy"
	"github.com/kustodian/kustodian/test/agentproc"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/timeline"
)

// predicted is what the benchmark reads of `plan -o json`.
type predicted struct {
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Windows []struct {
		Closes      time.Time `json:"closes"`
		Fits        bool      `json:"fits"`
		FirstLate   string    `json:"firstLate"`
		OverSeconds int64     `json:"overSeconds"`
		Late        int       `json:"late"`
	} `json:"windows"`
	Items []struct {
		Node           string     `json:"node"`
		End            *time.Time `json:"end"`
		EstimateSource string     `json:"estimateSource"`
	} `json:"items"`
}

// planAccuracy measures kustodian-ctl plan: a first rollout of the nodes
// fills their history; plan then predicts a second one, whose per-node work
// is drawn again from the same seeded distribution (each node its own
// typical time, with noise from run to run), and the prediction is compared
// with what happened: the makespan, each node's end, and a window closing
// halfway through.
func (b *bench) planAccuracy(ctx context.Context) error {
	o := b.o
	rng := rand.New(rand.NewPCG(o.planSeed, 1))
	nodes := make([]string, o.planNodes)
	typical := map[string]time.Duration{}
	for i := range nodes {
		nodes[i] = cluster.NodeName(i)
		// Log-normal: a median of 4 s, most between 2 and 8 s.
		typical[nodes[i]] = time.Duration(4 * math.Exp(0.35*rng.NormFloat64()) * float64(time.Second))
	}
	work := func() map[string]time.Duration {
		w := map[string]time.Duration{}
		for _, n := range nodes {
			w[n] = time.Duration(float64(typical[n]) * max(0.5, 1+0.1*rng.NormFloat64()))
		}
		return w
	}
	fmt.Printf("\nplan accuracy: %d nodes, per-node work log-normal (median 4 s, sigma 0.35) with 10%% noise per run, seed %d\n", len(nodes), o.planSeed)
	// The nodes' history from other benchmarks would be other work's.
	for _, n := range nodes {
		patch := []byte(`{"metadata":{"annotations":{"kustodian.io/history":null}}}`)
		if _, err := b.c.Client.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return err
		}
	}
	ns, err := b.namespace(ctx)
	if err != nil {
		return err
	}
	var specs []agentproc.Spec
	var cmds []*exec.Cmd
	defer func() {
		for _, c := range cmds {
			agentproc.Stop(c)
		}
	}()
	for _, n := range nodes {
		s, err := b.spec(ctx, ns, n)
		if err != nil {
			return err
		}
		cmd, err := agentproc.Start(s)
		if err != nil {
			return err
		}
		specs, cmds = append(specs, s), append(cmds, cmd)
	}
	for _, s := range specs {
		if err := waitLog(ctx, s.LogFile(), "agent started"); err != nil {
			return err
		}
	}
	first, err := b.timedRollout(ctx, ns, specs, nodes, work())
	if err != nil {
		return fmt.Errorf("first rollout: %w", err)
	}
	fmt.Printf("  first rollout (fills the history): makespan %.1fs\n", first.Makespan.Seconds())

	// A plan against a window that closes halfway through the rollout (as
	// long as the first took): a policy's window is in minutes, so the plan
	// starts a little later, half that before a minute's edge.
	halfway := first.Makespan / 2
	closes := time.Now().Add(halfway).Truncate(time.Minute).Add(time.Minute)
	winStart := closes.Add(-halfway).Truncate(time.Second)
	if err := applyWindow(ctx, b, ns, winStart, closes); err != nil {
		return err
	}
	out, err := b.ctl(ns).Run(ctx, append([]string{"plan", "-o", "json", "--start", winStart.UTC().Format(time.RFC3339)}, nodes...)...)
	if err != nil {
		return fmt.Errorf("plan --start: %w\n%s", err, out)
	}
	var pw predicted
	if err := json.Unmarshal([]byte(out), &pw); err != nil {
		return fmt.Errorf("plan --start -o json: %w\n%s", err, out)
	}
	if err := deletePolicy(ctx, b, ns); err != nil {
		return err
	}

	// Then the plan of the rollout, which starts right after it.
	out, err = b.ctl(ns).Run(ctx, append([]string{"plan", "-o", "json"}, nodes...)...)
	if err != nil {
		return fmt.Errorf("plan: %w\n%s", err, out)
	}
	var p predicted
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		return fmt.Errorf("plan -o json: %w\n%s", err, out)
	}
	order := make([]string, 0, len(p.Items))
	for _, it := range p.Items {
		if it.End == nil || it.EstimateSource != "node" {
			return fmt.Errorf("plan placed %s without its own history (%q)", it.Node, it.EstimateSource)
		}
		order = append(order, it.Node)
	}
	second, err := b.timedRollout(ctx, ns, specs, order, work())
	if err != nil {
		return fmt.Errorf("second rollout: %w", err)
	}
	actualEnd := map[string]time.Duration{}
	for _, n := range second.Nodes {
		actualEnd[n.Node] = n.Idle.Sub(second.Start)
	}
	// Both from the rollout's first request: the plan was made a moment
	// before it.
	var errs []float64
	for _, it := range p.Items {
		pred, act := it.End.Sub(p.Start), actualEnd[it.Node]
		errs = append(errs, math.Abs(pred.Seconds()-act.Seconds())/act.Seconds())
	}
	sort.Float64s(errs)
	predMakespan := p.End.Sub(p.Start)
	fmt.Printf("  makespan: predicted %.1fs, actual %.1fs: error %+.1f%% (target within 15%%)\n", predMakespan.Seconds(), second.Makespan.Seconds(),
		100*(predMakespan.Seconds()-second.Makespan.Seconds())/second.Makespan.Seconds())
	fmt.Printf("  each node's end: median error %.1f%% (target within 20%%), 90th percentile %.1f%%, largest %.1f%%\n",
		100*errs[len(errs)/2], 100*errs[len(errs)*9/10], 100*errs[len(errs)-1])

	// The window: which node would have been the first to end after it
	// closed, had the rollout started at the window's start.
	if len(pw.Windows) != 1 {
		return fmt.Errorf("plan with a window: %d window verdicts", len(pw.Windows))
	}
	w := pw.Windows[0]
	shift := winStart.Sub(second.Start)
	actualFirst, actualOver, actualLate := "", time.Duration(0), 0
	for _, n := range second.Nodes { // grant order
		if end := n.Idle.Add(shift); end.After(closes) {
			if actualFirst == "" {
				actualFirst, actualOver = n.Node, end.Sub(closes)
			}
			actualLate++
		}
	}
	fmt.Printf("  a window of %s (half the first rollout): predicted fits=%v, %d nodes late, the first %s by %ds; actual %d late, the first %s by %.0fs\n",
		closes.Sub(winStart).Round(time.Second), w.Fits, w.Late, w.FirstLate, w.OverSeconds, actualLate, actualFirst, actualOver.Seconds())
	return nil
}

// rolloutResult is a rollout as the timeline saw it.
type rolloutResult struct {
	Start    time.Time
	Makespan time.Duration
	Nodes    []timeline.NodeSummary
}

// timedRollout requests maintenance on the nodes one after the other, in
// order (each once its agent has written its record, so that the queue
// keeps that order); each node's script takes its work and ends.
func (b *bench) timedRollout(ctx context.Context, ns string, specs []agentproc.Spec, order []string, work map[string]time.Duration) (rolloutResult, error) {
	tctx, stop := context.WithCancel(ctx) // the recorder ends with the rollout
	defer stop()
	tl, err := timeline.Record(tctx, b.c.Client, ns, nil)
	if err != nil {
		return rolloutResult{}, err
	}
	byNode := map[string]agentproc.Spec{}
	for _, s := range specs {
		byNode[s.Node] = s
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, s := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := waitFile(rctx, s.InProgressFile()); err != nil {
				return
			}
			select { // the maintenance's own work
			case <-time.After(work[s.Node]):
			case <-rctx.Done():
				return
			}
			_ = os.Remove(s.RequestFile())
		}()
	}
	start := time.Now()
	for _, n := range order {
		if err := os.WriteFile(byNode[n].RequestFile(), nil, 0o644); err != nil {
			return rolloutResult{}, err
		}
		err := cluster.Eventually(ctx, time.Minute, func(ctx context.Context) error {
			_, err := b.c.Client.CoordinationV1().Leases(ns).Get(ctx, lock.RecordName(n), metav1.GetOptions{})
			return err
		})
		if err != nil {
			return rolloutResult{}, fmt.Errorf("%s's record: %w", n, err)
		}
	}
	if err := cluster.Eventually(ctx, 15*time.Minute, func(context.Context) error { return tl.AllIdle(order) }); err != nil {
		return rolloutResult{}, err
	}
	if err := tl.CheckExclusive(1); err != nil {
		return rolloutResult{}, err
	}
	sum := tl.Summarize()
	if len(sum.Nodes) != len(order) || !slices.Equal(grantOrder(sum), order) {
		return rolloutResult{}, fmt.Errorf("granted in order %v, want %v", grantOrder(sum), order)
	}
	return rolloutResult{Start: start, Makespan: sum.Nodes[len(sum.Nodes)-1].Idle.Sub(start), Nodes: sum.Nodes}, nil
}

func grantOrder(s timeline.Summary) []string {
	var out []string
	for _, n := range s.Nodes {
		out = append(out, n.Node)
	}
	return out
}

// applyWindow makes the nodes follow a policy whose one window is open from
// `from` (its minute) to `to`.
func applyWindow(ctx context.Context, b *bench, ns string, from, to time.Time) error {
	dyn, err := dynamic.NewForConfig(b.c.Config)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": policy.Group + "/" + policy.Version, "kind": policy.Kind,
		"metadata": map[string]any{"name": "window", "namespace": ns},
		"spec": map[string]any{
			"nodeSelector": map[string]any{"matchLabels": map[string]any{"type": "kwok"}},
			"windows":      []any{map[string]any{"start": from.UTC().Format("15:04"), "end": to.UTC().Format("15:04"), "timeZone": "UTC"}},
		},
	}}
	_, err = dyn.Resource(policy.GVR).Namespace(ns).Create(ctx, u, metav1.CreateOptions{})
	return err
}

// deletePolicy removes applyWindow's policy.
func deletePolicy(ctx context.Context, b *bench, ns string) error {
	dyn, err := dynamic.NewForConfig(b.c.Config)
	if err != nil {
		return err
	}
	return dyn.Resource(policy.GVR).Namespace(ns).Delete(ctx, "window", metav1.DeleteOptions{})
}
