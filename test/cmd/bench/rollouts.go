package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kustodian/kustodian/test/agentproc"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/timeline"
)

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
