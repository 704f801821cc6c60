// Command bench is `make bench`: it measures the agent against its targets
// (README, "Scale figures") on a control plane of its own and prints medians of
// several runs:
//
//   - request to cordon on an idle cluster;
//   - release of the lock to the next node's grant;
//   - a rolling maintenance over N nodes with P pods each and empty scripts:
//     makespan, time spent draining, overhead per node beyond draining;
//   - the API requests of the agents by verb and resource during a rollout
//     (from the API server's audit log), and all requests by verb (from
//     its /metrics);
//   - the agents' resident memory.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	appsv1 "k8s.io/api/apps/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/agentproc"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
	"github.com/kustodian/kustodian/test/timeline"
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
	if !o.scaleOnly {
		if err := runMain(ctx, o); err != nil {
			return err
		}
	}
	if len(sizes) > 0 {
		return runScale(ctx, o, sizes)
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

// runMain measures latencies and rolling maintenances (README, "Scale figures").
func runMain(ctx context.Context, o options) error {
	policy := filepath.Join(o.workdir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return err
	}
	waiting, err := parseWaiting(o.handoffWaiting)
	if err != nil {
		return err
	}
	nodes := o.nodes
	for _, w := range waiting {
		nodes = max(nodes, w+1)
	}
	copts := cluster.Options{Name: "kustodian-bench", Nodes: nodes, AuditPolicy: policy, Log: io.Discard}
	fmt.Printf("starting a control plane with %d kwok nodes (kube %s)\n", nodes, cluster.KubeVersion)
	_ = cluster.Down(ctx, copts) // a fresh one: the audit policy applies from the start
	c, err := cluster.Up(ctx, copts)
	if err != nil {
		return err
	}
	if !o.keepCluster {
		defer cluster.Down(context.Background(), copts)
	}
	if err := cluster.Eventually(ctx, 2*time.Minute, func(ctx context.Context) error { return nodesReady(ctx, c.Client, nodes) }); err != nil {
		return err
	}
	b := &bench{o: o, c: c}
	if o.handoffOnly {
		return b.handoffs(ctx)
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

// gateToCordon: a waiting node held by a closed gate of its policy (a
// window, then a blocking pod); the gate opens (the policy updated, the pod
// deleted) and the Node is seen unschedulable through a watch.
func (b *bench) gateToCordon(ctx context.Context) error {
	ns, err := b.namespace(ctx)
	if err != nil {
		return err
	}
	node := cluster.NodeName(1)
	s, err := b.spec(ctx, ns, node)
	if err != nil {
		return err
	}
	apply := func(spec map[string]any) error { return nodecreds.ApplyPolicy(ctx, b.c.Config, ns, "bench", spec) }
	later := time.Now().UTC().Add(3 * time.Hour)
	closedWindow := map[string]any{"windows": []any{map[string]any{"start": later.Format("15:04"), "end": later.Add(time.Hour).Format("15:04")}}}
	blockers := map[string]any{"blockers": map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"bench.kustodian.io/block": "true"}}}}
	if err := apply(closedWindow); err != nil {
		return err
	}
	cmd, err := startAgent(ctx, s)
	if err != nil {
		return err
	}
	defer agentproc.Stop(cmd)
	measure := func(close, open func() error, held string) ([]time.Duration, error) {
		var lat []time.Duration
		for i := 0; i <= b.o.runs; i++ { // run 0 warms up
			if err := close(); err != nil {
				return nil, err
			}
			if err := os.WriteFile(s.RequestFile(), nil, 0o644); err != nil {
				return nil, err
			}
			err := cluster.Eventually(ctx, time.Minute, func(ctx context.Context) error {
				l, err := b.c.Client.CoordinationV1().Leases(ns).Get(ctx, lock.RecordName(node), metav1.GetOptions{})
				if err != nil {
					return err
				}
				if r := lock.RecordFromLease(l); !strings.Contains(r.Message, held) {
					return fmt.Errorf("message %q", r.Message)
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			d, err := b.timeToCordon(ctx, node, open)
			if err != nil {
				return nil, err
			}
			if i > 0 {
				lat = append(lat, d)
			}
			if err := b.finish(ctx, ns, s); err != nil {
				return nil, err
			}
		}
		return lat, nil
	}
	lat, err := measure(func() error { return apply(closedWindow) },
		func() error {
			return apply(map[string]any{"windows": []any{map[string]any{"start": "00:00", "end": "24:00"}}})
		}, "outside window")
	if err != nil {
		return err
	}
	report("window opened (policy update) to cordon", lat)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "backup", Namespace: ns, Labels: map[string]string{"bench.kustodian.io/block": "true"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "b", Image: "registry.k8s.io/pause:3.10"}}}}
	lat, err = measure(func() error {
		if err := apply(blockers); err != nil {
			return err
		}
		_, err := b.c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err
	}, func() error {
		return b.c.Client.CoreV1().Pods(ns).Delete(ctx, "backup", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	}, "blocked by pod")
	if err != nil {
		return err
	}
	report("blocking pod deleted to cordon", lat)
	return nil
}

// releaseToGrant: A holds the lock, B waits; A's release and B's grant are
// seen through one watch of the lock Lease.
func (b *bench) releaseToGrant(ctx context.Context) error {
	ns, err := b.namespace(ctx)
	if err != nil {
		return err
	}
	var specs []agentproc.Spec
	for _, node := range []string{cluster.NodeName(1), cluster.NodeName(2)} {
		s, err := b.spec(ctx, ns, node)
		if err != nil {
			return err
		}
		specs = append(specs, s)
	}
	for _, s := range specs {
		cmd, err := startAgent(ctx, s)
		if err != nil {
			return err
		}
		defer agentproc.Stop(cmd)
	}
	var lat []time.Duration
	for i := 0; i <= b.o.runs; i++ {
		holder, waiter := specs[i%2], specs[(i+1)%2]
		if err := os.WriteFile(holder.RequestFile(), nil, 0o644); err != nil {
			return err
		}
		if err := waitFile(ctx, holder.InProgressFile()); err != nil {
			return err
		}
		if err := os.WriteFile(waiter.RequestFile(), nil, 0o644); err != nil {
			return err
		}
		if err := cluster.Eventually(ctx, time.Minute, func(ctx context.Context) error {
			l, err := b.c.Client.CoordinationV1().Leases(ns).Get(ctx, lock.RecordName(waiter.Node), metav1.GetOptions{})
			if err != nil || lock.RecordFromLease(l).State != lock.Waiting {
				return errors.New("not waiting yet")
			}
			return nil
		}); err != nil {
			return err
		}
		w, err := b.c.Client.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", lock.DefaultGroup.LockName(0)).String()})
		if err != nil {
			return err
		}
		if err := os.Remove(holder.RequestFile()); err != nil {
			return err
		}
		// The handoff is timed by the agents' own stamps, on this host's
		// one clock: the releaser's released-at and the grantee's
		// acquireTime. When this process happened to read the two events
		// says more about its scheduling than about the agents.
		var released, granted time.Time
		for ev := range w.ResultChan() {
			l, ok := ev.Object.(*coordv1.Lease)
			if !ok || lock.Holder(l) != waiter.Node {
				continue
			}
			if l.Spec.AcquireTime == nil {
				return fmt.Errorf("lock %s granted to %s without an acquireTime", l.Name, waiter.Node)
			}
			t, err := time.Parse(time.RFC3339Nano, l.Annotations[lock.AnnotationReleasedAt])
			if err != nil {
				return fmt.Errorf("lock %s granted to %s: %s: %w", l.Name, waiter.Node, lock.AnnotationReleasedAt, err)
			}
			released, granted = t, l.Spec.AcquireTime.Time
			break
		}
		w.Stop()
		if granted.IsZero() {
			return errors.New("the lock watch ended before the handoff")
		}
		if granted.Before(released) {
			return fmt.Errorf("lock granted at %s, before its release at %s", granted, released)
		}
		if i > 0 {
			lat = append(lat, granted.Sub(released))
		}
		if err := b.finish(ctx, ns, waiter); err != nil {
			return err
		}
		if err := cluster.Eventually(ctx, time.Minute, func(ctx context.Context) error {
			_, err := b.c.Client.CoordinationV1().Leases(ns).Get(ctx, lock.RecordName(holder.Node), metav1.GetOptions{})
			if err == nil {
				return errors.New("holder's record still there")
			}
			return nil
		}); err != nil {
			return err
		}
	}
	report("release to next grant (target < 0.5 s)", lat)
	return nil
}

// rollouts: all nodes request at once, with empty scripts.
func (b *bench) rollouts(ctx context.Context, auditLog string) error {
	o := b.o
	fmt.Printf("\nrolling maintenance: %d nodes, %d pods each, empty scripts, %d runs\n", o.nodes, o.podsPerNode, o.rolloutRuns)
	var makespans, drains, overheads []time.Duration
	var lastCalls map[string]int
	var lastVerbs map[string]float64
	var maxRSS int64
	for run := 0; run < o.rolloutRuns; run++ {
		ns, err := b.namespace(ctx)
		if err != nil {
			return err
		}
		if err := b.workload(ctx, ns); err != nil {
			return err
		}
		var specs []agentproc.Spec
		var cmds []*exec.Cmd
		for i := range o.nodes {
			s, err := b.spec(ctx, ns, cluster.NodeName(i))
			if err != nil {
				return err
			}
			cmd, err := agentproc.Start(s)
			if err != nil {
				return err
			}
			cmds = append(cmds, cmd)
			specs = append(specs, s)
		}
		stopAll := func() {
			for _, c := range cmds {
				agentproc.Stop(c)
			}
		}
		for _, s := range specs {
			if err := waitLog(ctx, s.LogFile(), "agent started"); err != nil {
				stopAll()
				return err
			}
		}
		tl, err := timeline.Record(ctx, b.c.Client, ns, nil)
		if err != nil {
			stopAll()
			return err
		}
		before, err := requestMetrics(ctx, b.c.Client)
		if err != nil {
			stopAll()
			return err
		}
		auditFrom := fileSize(auditLog)

		// The scripts: remove the request as soon as the agent says go.
		rctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, s := range specs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := waitFile(rctx, s.InProgressFile()); err == nil {
					_ = os.Remove(s.RequestFile())
				}
			}()
		}
		for _, s := range specs {
			if err := os.WriteFile(s.RequestFile(), nil, 0o644); err != nil {
				cancel()
				stopAll()
				return err
			}
		}
		nodes := make([]string, len(specs))
		for i, s := range specs {
			nodes[i] = s.Node
		}
		err = cluster.Eventually(ctx, 10*time.Minute, func(context.Context) error {
			for _, c := range cmds {
				maxRSS = max(maxRSS, agentproc.RSS(c.Process.Pid))
			}
			return tl.AllIdle(nodes)
		})
		cancel()
		wg.Wait()
		after, merr := requestMetrics(ctx, b.c.Client)
		stopAll()
		if err != nil {
			return err
		}
		if merr != nil {
			return merr
		}
		if err := tl.CheckExclusive(1); err != nil {
			return err
		}
		sum := tl.Summarize()
		var drain time.Duration
		for _, n := range sum.Nodes {
			drain += n.Drain
		}
		makespans = append(makespans, sum.Makespan)
		drains = append(drains, drain)
		overheads = append(overheads, (sum.Makespan-drain)/time.Duration(len(sum.Nodes)))
		fmt.Printf("  run %d: makespan %.2fs, draining %.2fs in all\n", run+1, sum.Makespan.Seconds(), drain.Seconds())
		lastCalls, err = agentCalls(auditLog, auditFrom)
		if err != nil {
			return err
		}
		lastVerbs = diff(after, before)
	}
	report("makespan", makespans)
	report("time spent draining (sum over nodes)", drains)
	report("overhead per node beyond draining (target < 1 s)", overheads)
	fmt.Printf("agents' resident memory, largest seen: %.1f MiB (target < 40 MiB)\n", float64(maxRSS)/(1<<20))

	fmt.Printf("\nAPI requests of the %d agents in the last run, from the audit log (user agent kustodian-agent):\n", o.nodes)
	printCounts(lastCalls)
	fmt.Printf("\nall API requests in the last run by verb, from the API server's /metrics (agents, controllers, kwok):\n")
	printCounts(toInts(lastVerbs))
	return nil
}

// workload spreads nodes×podsPerNode pods, with a PDB allowing 10% down.
func (b *bench) workload(ctx context.Context, ns string) error {
	n := int32(b.o.nodes * b.o.podsPerNode)
	labels := map[string]string{"app": "load"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "load", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: &n,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{"type": "kwok"},
					Containers:   []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
				},
			},
		},
	}
	if _, err := b.c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		return err
	}
	maxUnavailable := intstr.FromString("10%")
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "load", Namespace: ns},
		Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &maxUnavailable, Selector: &metav1.LabelSelector{MatchLabels: labels}},
	}
	if _, err := b.c.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		return err
	}
	return cluster.Eventually(ctx, 5*time.Minute, func(ctx context.Context) error {
		dep, err := b.c.Client.AppsV1().Deployments(ns).Get(ctx, "load", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if dep.Status.ReadyReplicas != n {
			return fmt.Errorf("%d of %d pods ready", dep.Status.ReadyReplicas, n)
		}
		return nil
	})
}

func nodesReady(ctx context.Context, client kubernetes.Interface, n int) error {
	list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	ready := 0
	for i := range list.Items {
		if cluster.NodeReady(&list.Items[i]) {
			ready++
		}
	}
	if ready < n {
		return fmt.Errorf("%d of %d nodes ready", ready, n)
	}
	return nil
}

// waitFile waits for a file to exist, through inotify.
func waitFile(ctx context.Context, path string) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	if err := w.Add(filepath.Dir(path)); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", path, ctx.Err())
		case <-w.Events:
		case err := <-w.Errors:
			return err
		}
	}
}

// startAgent starts an agent and waits until it has read the cluster.
func startAgent(ctx context.Context, s agentproc.Spec) (*exec.Cmd, error) {
	cmd, err := agentproc.Start(s)
	if err != nil {
		return nil, err
	}
	if err := waitLog(ctx, s.LogFile(), "agent started"); err != nil {
		agentproc.Stop(cmd)
		return nil, err
	}
	return cmd, nil
}

// waitLog waits until the agent's log contains s.
func waitLog(ctx context.Context, path, s string) error {
	return cluster.Eventually(ctx, time.Minute, func(context.Context) error {
		b, _ := os.ReadFile(path)
		if !strings.Contains(string(b), s) {
			return fmt.Errorf("%s does not say %q yet", path, s)
		}
		return nil
	})
}

// requestMetrics sums apiserver_request_total by verb.
func requestMetrics(ctx context.Context, client kubernetes.Interface) (map[string]float64, error) {
	body, err := client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading /metrics: %w", err)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(body)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels, value, ok := strings.Cut(strings.TrimPrefix(line, "apiserver_request_total{"), "} ")
		if !ok {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(value, &v); err != nil {
			continue
		}
		out[label(labels, "verb")] += v
	}
	return out, sc.Err()
}

func label(labels, name string) string {
	for _, kv := range strings.Split(labels, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

func diff(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

func toInts(m map[string]float64) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k] = int(v)
	}
	return out
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// agentCalls counts the agents' requests in the audit log from offset on,
// by "verb resource[/subresource]".
func agentCalls(path string, offset int64) (map[string]int, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, err
	}
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Verb      string `json:"verb"`
			UserAgent string `json:"userAgent"`
			ObjectRef *struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
			} `json:"objectRef"`
			RequestURI string `json:"requestURI"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || !strings.HasPrefix(ev.UserAgent, "kustodian-agent") {
			continue
		}
		what := ev.RequestURI
		if ev.ObjectRef != nil {
			what = ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				what += "/" + ev.ObjectRef.Subresource
			}
		}
		out[ev.Verb+" "+what]++
	}
	return out, sc.Err()
}

func printCounts(m map[string]int) {
	keys := make([]string, 0, len(m))
	total := 0
	for k, v := range m {
		keys = append(keys, k)
		total += v
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || (m[keys[i]] == m[keys[j]] && keys[i] < keys[j]) })
	for _, k := range keys {
		fmt.Printf("  %6d  %s\n", m[k], k)
	}
	fmt.Printf("  %6d  in all\n", total)
}

func report(what string, d []time.Duration) {
	if len(d) == 0 {
		fmt.Printf("%-52s no runs\n", what)
		return
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	fmt.Printf("%-52s median %8s  (min %s, max %s, %d runs)\n", what, round(s[len(s)/2]), round(s[0]), round(s[len(s)-1]), len(s))
}

func round(d time.Duration) time.Duration {
	if d > 10*time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(100 * time.Microsecond)
}
