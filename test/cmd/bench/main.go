// Command bench is `make bench`: it measures the agent against its targets
// (docs/performance.md, "The queue at scale") on a control plane of its own and prints medians of
// several runs:
//
//   - request to cordon on an idle cluster;
//   - release of the lock to the next node's grant;
//   - a rolling maintenance over N nodes with P pods each and empty scripts:
//     makespan, time spent draining, overhead per node beyond draining;
//   - the API requests of the agents by verb and resource during a rollout
//     (from the API server's audit log), and all requests by verb (from
//     its /metrics);
//   - the agents' resident memory;
//   - the accuracy of kustodian-ctl plan: a rollout with seeded per-node
//     work predicted from the history of a first one, against what
//     happened (makespan, each node's end, a window too short).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/agentproc"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

type options struct {
	binary, ctl        string
	workdir            string
	runs, rolloutRuns  int
	nodes, podsPerNode int
	keepCluster        bool
	// The scale mode.
	scale          string
	scaleOnly      bool
	handoffWaiting string
	handoffOnly    bool
	scaleWindow    time.Duration
	scaleHandoffs  int
	scaleHeartbeat time.Duration
	// scaleHandoffTime bounds the handoffs at each N.
	scaleHandoffTime time.Duration
	// The fleet refusal: its number of agents (0: none).
	refusal     int
	refusalOnly bool
	// The plan's accuracy.
	planNodes int
	planSeed  uint64
	planOnly  bool
}

func main() {
	var o options
	flag.StringVar(&o.binary, "kustodian", "bin/kustodian", "the kustodian binary")
	flag.StringVar(&o.ctl, "kustodian-ctl", "bin/kustodian-ctl", "the kustodian-ctl binary (install, node kubeconfigs)")
	flag.IntVar(&o.runs, "runs", 7, "runs of each latency measurement")
	flag.IntVar(&o.rolloutRuns, "rollout-runs", 3, "runs of the rolling maintenance")
	flag.IntVar(&o.nodes, "nodes", 20, "nodes in the rolling maintenance")
	flag.IntVar(&o.podsPerNode, "pods-per-node", 10, "pods per node in the rolling maintenance")
	flag.StringVar(&o.workdir, "workdir", filepath.Join(os.TempDir(), "kustodian-bench"), "directory of the nodes' host files and logs")
	flag.BoolVar(&o.keepCluster, "keep-cluster", false, "leave the benchmark's cluster running")
	flag.StringVar(&o.scale, "scale", "50,200,500", "the scale mode's numbers of agents, comma-separated (empty: no scale mode)")
	flag.BoolVar(&o.scaleOnly, "scale-only", false, "run only the scale mode")
	flag.StringVar(&o.handoffWaiting, "handoff-waiting", "1,59", "numbers of agent processes waiting behind the holder for the handoff under load, comma-separated (empty: none)")
	flag.BoolVar(&o.handoffOnly, "handoff-only", false, "run only the handoff under load")
	flag.DurationVar(&o.scaleWindow, "scale-window", 30*time.Second, "how long the scale mode measures the steady state")
	flag.IntVar(&o.scaleHandoffs, "scale-handoffs", 30, "handoffs the scale mode times at each N")
	flag.DurationVar(&o.scaleHandoffTime, "scale-handoff-time", 5*time.Minute, "how long the scale mode waits for its handoffs at each N")
	flag.DurationVar(&o.scaleHeartbeat, "scale-heartbeat", 10*time.Second, "the agents' heartbeat in the scale mode (the default of queue.heartbeat)")
	flag.IntVar(&o.refusal, "refusal", 0, "agents refusing one rollout at once, for its writes and Events (0: none)")
	flag.BoolVar(&o.refusalOnly, "refusal-only", false, "run only the fleet refusal")
	flag.IntVar(&o.planNodes, "plan-nodes", 20, "nodes of the plan's accuracy benchmark (0: none)")
	flag.Uint64Var(&o.planSeed, "plan-seed", 1, "seed of the per-node work of the plan's accuracy benchmark")
	flag.BoolVar(&o.planOnly, "plan-only", false, "run only the plan's accuracy benchmark")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: "+err.Error())
		os.Exit(1)
	}
}

const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

func run(ctx context.Context, o options) error {
	if _, err := os.Stat(o.binary); err != nil {
		return fmt.Errorf("%s: %w (run make bench from the repository's root)", o.binary, err)
	}
	if err := os.RemoveAll(o.workdir); err != nil {
		return err
	}
	if err := os.MkdirAll(o.workdir, 0o755); err != nil {
		return err
	}
	sizes, err := parseSizes(o.scale)
	if err != nil {
		return err
	}
	fmt.Printf("machine: %d cores; each figure is the median of its runs, with min and max\n\n", runtime.NumCPU())
	if o.refusalOnly {
		if o.refusal < 1 {
			return fmt.Errorf("--refusal-only: --refusal %d: want a number of agents of at least 1", o.refusal)
		}
		return runRefusal(ctx, o)
	}
	if !o.scaleOnly {
		if err := runMain(ctx, o); err != nil {
			return err
		}
	}
	if len(sizes) > 0 && !o.handoffOnly && !o.planOnly {
		if err := runScale(ctx, o, sizes); err != nil {
			return err
		}
	}
	if o.refusal > 0 && !o.handoffOnly && !o.planOnly {
		return runRefusal(ctx, o)
	}
	return nil
}

// parseSizes reads --scale.
func parseSizes(v string) ([]int, error) {
	var sizes []int
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 2 {
			return nil, fmt.Errorf("--scale %q: %q is not a number of agents of at least 2", v, f)
		}
		sizes = append(sizes, n)
	}
	return sizes, nil
}

// runMain measures latencies and rolling maintenances (docs/performance.md, "The queue at scale").
func runMain(ctx context.Context, o options) error {
	policy := filepath.Join(o.workdir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return err
	}
	waiting, err := parseWaiting(o.handoffWaiting)
	if err != nil {
		return err
	}
	nodes := max(o.nodes, o.planNodes)
	for _, w := range waiting {
		nodes = max(nodes, w+1)
	}
	copts := cluster.Options{Name: "kustodian-bench", Nodes: nodes, AuditPolicy: policy, Log: io.Discard}
	fmt.Printf("starting a control plane with %d kwok nodes (kube %s)\n", nodes, cluster.KubeVersion)
	c, stop, err := freshCluster(ctx, o, copts, 2*time.Minute)
	if err != nil {
		return err
	}
	defer stop()
	b := &bench{o: o, c: c}
	if o.handoffOnly {
		return b.handoffs(ctx)
	}
	if o.planOnly {
		return b.planAccuracy(ctx)
	}
	if err := b.requestToCordon(ctx); err != nil {
		return fmt.Errorf("request to cordon: %w", err)
	}
	if err := b.releaseToGrant(ctx); err != nil {
		return fmt.Errorf("release to grant: %w", err)
	}
	if err := b.gateToCordon(ctx); err != nil {
		return fmt.Errorf("gate to cordon: %w", err)
	}
	if err := b.rollouts(ctx, copts.AuditLog()); err != nil {
		return fmt.Errorf("rolling maintenance: %w", err)
	}
	if o.planNodes > 0 {
		if err := b.planAccuracy(ctx); err != nil {
			return fmt.Errorf("plan accuracy: %w", err)
		}
	}
	return b.handoffs(ctx)
}

// handoffs runs handoffUnderLoad for each --handoff-waiting.
func (b *bench) handoffs(ctx context.Context) error {
	sizes, err := parseWaiting(b.o.handoffWaiting)
	if err != nil {
		return err
	}
	if len(sizes) > 0 {
		fmt.Printf("\nhandoff under load: agent processes waiting behind a holder, %d handoffs each\n", b.o.runs*3)
	}
	for _, w := range sizes {
		if err := b.handoffUnderLoad(ctx, w); err != nil {
			return fmt.Errorf("handoff with %d waiting: %w", w, err)
		}
	}
	return nil
}

// parseWaiting reads --handoff-waiting.
func parseWaiting(v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--handoff-waiting %q: %q is not a number of at least 1", v, f)
		}
		out = append(out, n)
	}
	return out, nil
}

type bench struct {
	o options
	c *cluster.Cluster
	n int // namespaces made
}

// namespace makes a fresh installation (kustodian-ctl install: RBAC and
// admission policies) in a fresh namespace for one measurement.
func (b *bench) namespace(ctx context.Context) (string, error) {
	b.n++
	name := fmt.Sprintf("bench-%d-%d", os.Getpid(), b.n)
	return name, b.ctl(name).Install(ctx, "kube-system")
}

func (b *bench) ctl(ns string) nodecreds.Ctl {
	return nodecreds.Ctl{Binary: b.o.ctl, Kubeconfig: b.c.Kubeconfig, Namespace: ns}
}

// spec is the agent of node, with the node's own kubeconfig, as on a fleet.
func (b *bench) spec(ctx context.Context, ns, node string, extra ...string) (agentproc.Spec, error) {
	s := agentproc.Spec{Binary: b.o.binary, Namespace: ns, Node: node,
		Dir: filepath.Join(b.o.workdir, ns, node), Extra: append([]string{"--stay"}, extra...)}
	if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return s, err
	}
	s.Kubeconfig = filepath.Join(s.Dir, "kubeconfig")
	return s, b.ctl(ns).NodeKubeconfig(ctx, node, s.Kubeconfig)
}

// requestToCordon: an idle agent, a request file created, the Node seen
// unschedulable through a watch.
func (b *bench) requestToCordon(ctx context.Context) error {
	ns, err := b.namespace(ctx)
	if err != nil {
		return err
	}
	node := cluster.NodeName(0)
	s, err := b.spec(ctx, ns, node)
	if err != nil {
		return err
	}
	cmd, err := startAgent(ctx, s)
	if err != nil {
		return err
	}
	defer agentproc.Stop(cmd)
	var lat []time.Duration
	for i := 0; i <= b.o.runs; i++ { // run 0 warms up
		d, err := b.timeToCordon(ctx, node, func() error { return os.WriteFile(s.RequestFile(), nil, 0o644) })
		if err != nil {
			return err
		}
		if i > 0 {
			lat = append(lat, d)
		}
		if err := b.finish(ctx, ns, s); err != nil {
			return err
		}
	}
	report("request to cordon (idle cluster; target < 0.5 s)", lat)
	return nil
}

// timeToCordon does act and times it until node is seen unschedulable,
// through a watch started before act.
func (b *bench) timeToCordon(ctx context.Context, node string, act func() error) (time.Duration, error) {
	w, err := b.c.Client.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", node).String()})
	if err != nil {
		return 0, err
	}
	defer w.Stop()
	t0 := time.Now()
	if err := act(); err != nil {
		return 0, err
	}
	for ev := range w.ResultChan() {
		if n, ok := ev.Object.(*corev1.Node); ok && n.Spec.Unschedulable {
			return time.Since(t0), nil
		}
	}
	return 0, errors.New("the node watch ended before the cordon")
}

// finish plays an empty script: once the agent says go, remove the request,
// then wait for the node to be Idle again.
func (b *bench) finish(ctx context.Context, ns string, s agentproc.Spec) error {
	if err := waitFile(ctx, s.InProgressFile()); err != nil {
		return err
	}
	if err := os.Remove(s.RequestFile()); err != nil {
		return err
	}
	return cluster.Eventually(ctx, time.Minute, func(ctx context.Context) error {
		_, err := b.c.Client.CoordinationV1().Leases(ns).Get(ctx, lock.RecordName(s.Node), metav1.GetOptions{})
		if err == nil {
			return errors.New("record still there")
		}
		return nil
	})
}
