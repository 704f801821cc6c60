package main

// The scale mode (docs/agent.md, "What an agent watches, and what it costs"): N agents all waiting behind one
// holder, for several N side by side. The agents run many to a process
// (test/cmd/swarm: the binary's own command tree, one per node, each with
// its node's kubeconfig), on kwok nodes, with the default heartbeat.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/agentproc"
	"github.com/kustodian/kustodian/test/cluster"
)

// scaleResult is what one N measured.
type scaleResult struct {
	n      int
	window time.Duration
	// Steady state, all waiting: the agents' requests by "verb resource"
	// (audit log), watch events sent for Leases and their bytes (the API
	// server's metrics), the swarm's CPU and resident memory.
	calls       map[string]int
	watchEvents float64
	watchBytes  float64
	cpu         time.Duration
	rss         int64
	// kubelets: the simulated kubelets' node-Lease writes in the window
	// (the baseline); the API server's and etcd's CPU, and the API
	// server's largest resident memory.
	kubelets       int
	apiCPU, etcCPU time.Duration
	apiRSS         int64
	// Handoffs: release → next grant, and grant → next grant (a node's
	// whole cycle with an empty script and no pods); want is how many
	// were asked for (fewer came within the time allowed).
	handoffs, cycles []time.Duration
	want             int
	// span: the first release to the last grant measured (with want =
	// N-1, the time the whole queue took to drain).
	span time.Duration
	// releaseSeen: release → the release event reaching a watcher outside
	// the swarm (this process): the API server's share of a handoff.
	releaseSeen []time.Duration
}

func runScale(ctx context.Context, o options, sizes []int) error {
	maxN := 0
	for _, n := range sizes {
		maxN = max(maxN, n)
	}
	policy := filepath.Join(o.workdir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return err
	}
	swarm, err := buildSwarm(ctx, o)
	if err != nil {
		return err
	}
	// Each agent watches its host files and its jobs through inotify.
	if err := raiseInotify(2*maxN + 256); err != nil {
		return err
	}
	copts := cluster.Options{Name: "kustodian-scale", Nodes: maxN, AuditPolicy: policy, Log: io.Discard, KubeletHeartbeats: true}
	fmt.Printf("\nscale: starting a control plane with %d kwok nodes\n", maxN)
	c, stop, err := freshCluster(ctx, o, copts, 5*time.Minute)
	if err != nil {
		return err
	}
	defer stop()
	b := &bench{o: o, c: c}
	var results []scaleResult
	for _, n := range sizes {
		r, err := b.scale(ctx, swarm, copts, n)
		if err != nil {
			if len(results) > 0 {
				printScale(results, o.scaleHeartbeat) // what was measured before
			}
			return fmt.Errorf("N=%d: %w", n, err)
		}
		results = append(results, r)
		printScale([]scaleResult{r}, o.scaleHeartbeat) // each N as it is done
	}
	printScale(results, o.scaleHeartbeat)
	return nil
}

// scale measures N agents: node 0 holds the lock (its script never ends
// while the steady state is measured), nodes 1..N-1 wait; then the holder
// finishes and handoffs follow, each script ending as soon as it may start.
func (b *bench) scale(ctx context.Context, swarm string, copts cluster.Options, n int) (scaleResult, error) {
	r := scaleResult{n: n, window: b.o.scaleWindow}
	auditLog := copts.AuditLog()
	apiPID, err := copts.PID("kube-apiserver")
	if err != nil {
		return r, err
	}
	etcdPID, err := copts.PID("etcd")
	if err != nil {
		return r, err
	}
	ns, err := b.namespace(ctx)
	if err != nil {
		return r, err
	}
	fmt.Printf("scale N=%d: minting %d node kubeconfigs in %s\n", n, n, ns)
	nodes := make([]string, n)
	specs := make([]agentproc.Spec, n)
	if err := parallel(ctx, n, 4, func(i int) error {
		nodes[i] = cluster.NodeName(i)
		s, err := b.spec(ctx, ns, nodes[i])
		specs[i] = s
		return err
	}); err != nil {
		return r, err
	}
	logPath := filepath.Join(b.o.workdir, ns, "swarm.log")
	log, err := os.Create(logPath)
	if err != nil {
		return r, err
	}
	defer log.Close()
	cmd := exec.Command(swarm, "--namespace", ns, "--workdir", b.o.workdir, "--nodes", strings.Join(nodes, ","),
		"--agent-flag=--queue-heartbeat="+b.o.scaleHeartbeat.String())
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return r, err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	// Starting takes each agent a LIST or two and its watches: on two
	// cores shared with the control plane, about a quarter of a second
	// each at N=1000.
	long := max(5*time.Minute, time.Duration(n)*time.Second/2)
	if err := waitCount(ctx, logPath, `"msg":"agent started"`, n, long); err != nil {
		return r, err
	}
	leases := b.c.Client.CoordinationV1().Leases(ns)
	// The holder first, then everyone else at once.
	if err := os.WriteFile(specs[0].RequestFile(), nil, 0o644); err != nil {
		return r, err
	}
	if err := waitFile(ctx, specs[0].InProgressFile()); err != nil {
		return r, err
	}
	fmt.Printf("scale N=%d: %s holds the lock; %d requests\n", n, nodes[0], n-1)
	for _, s := range specs[1:] {
		if err := os.WriteFile(s.RequestFile(), nil, 0o644); err != nil {
			return r, err
		}
	}
	// Once a second, not more: the benchmark's own LISTs must not weigh
	// on what it measures.
	joined := time.Now()
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*long, true, func(ctx context.Context) (bool, error) {
		list, err := leases.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		waiting := 0
		for i := range list.Items {
			l := &list.Items[i]
			if lock.IsRecordName(l.Name) && lock.RecordFromLease(l).State == lock.Waiting {
				waiting++
			}
		}
		return waiting == n-1, nil
	})
	if err != nil {
		return r, fmt.Errorf("waiting for %d records to say Waiting: %w", n-1, err)
	}
	fmt.Printf("scale N=%d: all %d waiting after %s; settling for %s, then measuring for %s\n",
		n, n-1, time.Since(joined).Round(100*time.Millisecond), 2*b.o.scaleHeartbeat, r.window)
	// Positions and messages settle within a couple of heartbeats of the
	// last join; the steady state is what comes after.
	select {
	case <-ctx.Done():
		return r, ctx.Err()
	case <-time.After(2 * b.o.scaleHeartbeat):
	}
	before, err := watchMetrics(ctx, b)
	if err != nil {
		return r, err
	}
	cpu0, api0, etcd0 := cpuTime(cmd.Process.Pid), cpuTime(apiPID), cpuTime(etcdPID)
	auditFrom := fileSize(auditLog)
	t0 := time.Now()
	var rssMax int64
	tick := time.NewTicker(time.Second)
	for time.Since(t0) < r.window {
		select {
		case <-ctx.Done():
			tick.Stop()
			return r, ctx.Err()
		case <-tick.C:
			rssMax = max(rssMax, agentproc.RSS(cmd.Process.Pid))
			r.apiRSS = max(r.apiRSS, agentproc.RSS(apiPID))
		}
	}
	tick.Stop()
	elapsed := time.Since(t0)
	r.window = elapsed
	r.cpu = cpuTime(cmd.Process.Pid) - cpu0
	r.apiCPU, r.etcCPU = cpuTime(apiPID)-api0, cpuTime(etcdPID)-etcd0
	r.rss = rssMax
	after, err := watchMetrics(ctx, b)
	if err != nil {
		return r, err
	}
	r.watchEvents = after.events - before.events
	r.watchBytes = after.bytes - before.bytes
	if r.calls, r.kubelets, err = auditCalls(auditLog, auditFrom); err != nil {
		return r, err
	}

	// Handoffs, each script ending at once.
	handoffs := min(n-1, b.o.scaleHandoffs)
	r.want = handoffs
	fmt.Printf("scale N=%d: %d handoffs\n", n, handoffs)
	w, err := leases.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return r, err
	}
	defer w.Stop()
	if err := os.Remove(specs[0].RequestFile()); err != nil {
		return r, err
	}
	byNode := map[string]agentproc.Spec{}
	for _, s := range specs {
		byNode[s.Node] = s
	}
	var scripts sync.WaitGroup
	defer scripts.Wait()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	seen := map[string]bool{nodes[0]: true}
	releasedSeen := map[string]time.Time{} // by released-at
	var lastGrant, firstRelease time.Time
	deadline := time.After(b.o.scaleHandoffTime)
	for len(r.handoffs) < handoffs {
		var ev any
		select {
		case e, ok := <-w.ResultChan():
			if !ok {
				return r, errors.New("the Lease watch ended during the handoffs")
			}
			ev = e.Object
		case <-deadline:
			fmt.Printf("scale N=%d: only %d of %d handoffs within %s\n", n, len(r.handoffs), handoffs, b.o.scaleHandoffTime)
			return r, nil
		}
		l, ok := ev.(*coordv1.Lease)
		if !ok || !lock.IsLockName(l.Name) {
			continue
		}
		h := lock.Holder(l)
		if at := l.Annotations[lock.AnnotationReleasedAt]; h == "" && at != "" {
			if _, ok := releasedSeen[at]; !ok {
				releasedSeen[at] = time.Now()
			}
			continue
		}
		if h == "" || seen[h] || l.Spec.AcquireTime == nil {
			continue
		}
		seen[h] = true
		released, err := time.Parse(time.RFC3339Nano, l.Annotations[lock.AnnotationReleasedAt])
		if err != nil {
			return r, fmt.Errorf("lock %s granted to %s: %s: %w", l.Name, h, lock.AnnotationReleasedAt, err)
		}
		granted := l.Spec.AcquireTime.Time
		r.handoffs = append(r.handoffs, granted.Sub(released))
		if firstRelease.IsZero() {
			firstRelease = released
		}
		r.span = granted.Sub(firstRelease)
		if at, ok := releasedSeen[l.Annotations[lock.AnnotationReleasedAt]]; ok {
			r.releaseSeen = append(r.releaseSeen, at.Sub(released))
		}
		if !lastGrant.IsZero() {
			r.cycles = append(r.cycles, granted.Sub(lastGrant))
		}
		lastGrant = granted
		s, ok := byNode[h]
		if !ok {
			return r, fmt.Errorf("lock %s granted to %s, not one of the benchmark's nodes", l.Name, h)
		}
		scripts.Add(1)
		go func() {
			defer scripts.Done()
			if err := waitFile(sctx, s.InProgressFile()); err == nil {
				_ = os.Remove(s.RequestFile())
			}
		}()
	}
	return r, nil
}
