package main

// The fleet refusal (docs/performance.md, "A rollout every node writes at
// once"): N agents with rollouts enabled, one rollout signed by a key none
// of them trusts, so every node refuses it at once. What it costs the
// control plane: the writes of the rollout's status (and how many of them
// conflicted), the RolloutRefused Events, and how long until every node's
// entry said Refused.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"

	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/kustodian/kustodian/test/agentproc"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// refusalResult is what the refusal measured.
type refusalResult struct {
	n                int
	refused          int            // entries Refused when the wait ended
	waited           time.Duration  // how long the wait for them lasted
	allRefused       time.Duration  // rollout created → every entry Refused
	counted          time.Duration  // rollout created → status.counts.refused = N
	traffic          rolloutTraffic // what the rollouts cost the API server meanwhile
	events, most     int            // RolloutRefused Events, and most for one node
	swarmCPU, apiCPU time.Duration
	swarmRSS         int64
	evented          int // nodes with an Event
}

func runRefusal(ctx context.Context, o options) error {
	n := o.refusal
	swarm, err := buildSwarm(ctx, o)
	if err != nil {
		return err
	}
	if err := raiseInotify(2*n + 256); err != nil {
		return err
	}
	copts := cluster.Options{Name: "kustodian-refusal", Nodes: n, Log: io.Discard}
	fmt.Printf("\nrefusal: starting a control plane with %d kwok nodes\n", n)
	c, stop, err := freshCluster(ctx, o, copts, 5*time.Minute)
	if err != nil {
		return err
	}
	defer stop()
	b := &bench{o: o, c: c}
	r, err := b.refusal(ctx, swarm, copts, n)
	if err != nil {
		return err
	}
	fmt.Printf("\nrefusal: %d agents in one process refusing one rollout at once (signed by a key no host trusts)\n", r.n)
	if r.refused < r.n {
		fmt.Printf("  entries Refused                                    %d of %d within %s (not all)\n", r.refused, r.n, round(r.waited))
	} else {
		fmt.Printf("  every entry Refused after the rollout's creation   %s\n", round(r.allRefused))
		fmt.Printf("  status.counts.refused = %d after                  %s\n", r.n, round(r.counted))
	}
	t, per := r.traffic, float64(max(r.refused, 1))
	fmt.Printf("  status writes (conflicts)                          %d (%d): %.2f per node refused\n", t.writes, t.conflicts, float64(t.writes)/per)
	fmt.Printf("  status writes by HTTP code                         %s\n", byCode(t.codes))
	fmt.Printf("  watch events of MaintenanceRollouts sent (MiB)     %d (%.1f): %.0f per node refused\n", t.watchEvents, mib(t.watchBytes), float64(t.watchEvents)/per)
	fmt.Printf("  reads (GET, LIST) of MaintenanceRollouts (MiB)     %d (%.1f)\n", t.reads, mib(t.readBytes))
	fmt.Printf("  watch events of Nodes sent meanwhile (MiB)         %d (%.1f)\n", t.nodeEvents, mib(t.nodeBytes))
	fmt.Printf("  RolloutRefused Events; most for one node           %d; %d (%d nodes with one; the others' writes timed out)\n", r.events, r.most, r.evented)
	fmt.Printf("  CPU: the agents' process; the API server           %s; %s\n", round(r.swarmCPU), round(r.apiCPU))
	fmt.Printf("  the agents' process, resident at most              %.0f MiB\n", float64(r.swarmRSS)/(1<<20))
	return nil
}

// buildSwarm builds test/cmd/swarm, the agents of many nodes in one process.
func buildSwarm(ctx context.Context, o options) (string, error) {
	swarm := filepath.Join(o.workdir, "swarm")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", swarm, "./test/cmd/swarm").CombinedOutput(); err != nil {
		return "", fmt.Errorf("building test/cmd/swarm: %v: %s", err, out)
	}
	return swarm, nil
}

func (b *bench) refusal(ctx context.Context, swarm string, copts cluster.Options, n int) (refusalResult, error) {
	r := refusalResult{n: n}
	apiPID, err := copts.PID("kube-apiserver")
	if err != nil {
		return r, err
	}
	ns, err := b.namespace(ctx)
	if err != nil {
		return r, err
	}
	keys := filepath.Join(b.o.workdir, ns, "keys")
	trusted, err := writeKey(filepath.Join(keys, "trusted"))
	if err != nil {
		return r, err
	}
	stranger, err := writeKey(filepath.Join(keys, "stranger"))
	if err != nil {
		return r, err
	}
	fmt.Printf("refusal N=%d: minting %d node kubeconfigs in %s\n", n, n, ns)
	nodes := make([]string, n)
	if err := parallel(ctx, n, 4, func(i int) error {
		nodes[i] = cluster.NodeName(i)
		_, err := b.spec(ctx, ns, nodes[i])
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
		"--agent-flag=--rollouts-enabled", "--agent-flag=--rollouts-trusted-keys="+trusted.Trusted)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return r, err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	// An agent with rollouts enabled reads more at start than one of the
	// scale mode: at N=1,000 on 2 cores, 950 had started after 8 minutes.
	long := max(5*time.Minute, time.Duration(n)*time.Second)
	if err := waitCount(ctx, logPath, `"msg":"agent started"`, n, long); err != nil {
		return r, fmt.Errorf("waiting %s for %d agents to say they started (%s): %w", long, n, logPath, err)
	}
	// The rollout's summary counts the Nodes labelled as running rollouts.
	err = wait.PollUntilContextTimeout(ctx, 2*time.Second, long, true, func(ctx context.Context) (bool, error) {
		list, err := b.c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: rollout.LabelRollouts + "=enabled"})
		if err != nil {
			return false, err
		}
		return len(list.Items) >= n, nil
	})
	if err != nil {
		return r, fmt.Errorf("waiting for %d Nodes labelled %s=enabled: %w", n, rollout.LabelRollouts, err)
	}
	script := filepath.Join(keys, "script.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntrue\n"), 0o755); err != nil {
		return r, err
	}
	dyn, err := dynamic.NewForConfig(b.c.Config)
	if err != nil {
		return r, err
	}
	before, err := rolloutRequests(ctx, b)
	if err != nil {
		return r, err
	}
	cpu0, api0 := cpuTime(cmd.Process.Pid), cpuTime(apiPID)
	fmt.Printf("refusal N=%d: every agent started and its Node labelled; the rollout created\n", n)
	t0 := time.Now()
	if out, err := b.ctl(ns).Run(ctx, "rollout", "create", "stranger", "--script", script, "--stage", "all", "--key", stranger.Private); err != nil {
		return r, fmt.Errorf("kustodian-ctl rollout create: %w\n%s", err, out)
	}
	// Once a second: the benchmark's own reads must not weigh on it.
	err = wait.PollUntilContextTimeout(ctx, time.Second, long, true, func(ctx context.Context) (bool, error) {
		u, err := dyn.Resource(rollout.GVR).Namespace(ns).Get(ctx, "stranger", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		ro, err := rollout.FromUnstructured(u)
		if err != nil {
			return false, err
		}
		refused := 0
		for _, e := range ro.Status.Nodes {
			if e.State == rollout.Refused {
				refused++
			}
		}
		r.refused, r.waited = refused, time.Since(t0)
		r.swarmRSS = max(r.swarmRSS, agentproc.RSS(cmd.Process.Pid))
		if refused == n && r.allRefused == 0 {
			r.allRefused = time.Since(t0)
		}
		if ro.Status.Counts.Refused == n && r.counted == 0 {
			r.counted = time.Since(t0)
		}
		return r.allRefused > 0 && r.counted > 0, nil
	})
	if err != nil && !wait.Interrupted(err) {
		return r, fmt.Errorf("waiting for %d Refused entries and the summary counting them: %w", n, err)
	}
	// An agent records its Event just after its entry's write, so those
	// that come at all come within seconds of the last entry; when not
	// every entry came in time, the Events of those that did.
	events := time.Minute
	if r.refused < n {
		fmt.Printf("refusal N=%d: only %d entries Refused within %s; counting what came\n", n, r.refused, long)
		events = 10 * time.Second
	}
	per := map[string]int{}
	// The reads use ctx, not the poll's: a client's rate limiter refuses
	// a wait that would pass the poll's deadline, which is no error.
	err = wait.PollUntilContextTimeout(ctx, time.Second, events, true, func(context.Context) (bool, error) {
		evs, err := b.c.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "reason=RolloutRefused"})
		if err != nil {
			return false, err
		}
		per = refusalsByNode(evs.Items, "stranger")
		return len(per) >= r.refused, nil
	})
	if err != nil && !wait.Interrupted(err) {
		return r, fmt.Errorf("waiting for a RolloutRefused Event from each of %d nodes (%d so far): %w", n, len(per), err)
	}
	// An Event is worth a try, not a retry: one whose write timed out on
	// the loaded API server is lost (the agent logs "could not record
	// event").
	r.evented = len(per)
	r.swarmCPU, r.apiCPU = cpuTime(cmd.Process.Pid)-cpu0, cpuTime(apiPID)-api0
	for _, c := range per {
		r.events += c
		r.most = max(r.most, c)
	}
	after, err := rolloutRequests(ctx, b)
	if err != nil {
		return r, err
	}
	r.traffic = after.minus(before)
	return r, nil
}

// writeKey makes a rollout signing key in dir.
func writeKey(dir string) (nodecreds.RolloutKey, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nodecreds.RolloutKey{}, err
	}
	return nodecreds.WriteRolloutKey(dir)
}

// refusalsByNode counts the RolloutRefused Events of rollout name by node
// (an Event's count included).
func refusalsByNode(evs []corev1.Event, name string) map[string]int {
	per := map[string]int{}
	for _, ev := range evs {
		if strings.Contains(ev.Message, "rollout "+name+" ") {
			per[ev.InvolvedObject.Name] += max(1, int(ev.Count))
		}
	}
	return per
}

// rolloutTraffic is what the MaintenanceRollouts cost the API server,
// from its metrics: the writes of their status (and the conflicts among
// them), the watch events it sent of them (and their bytes: every watcher
// counts), and the reads (GET and LIST, of the objects or their metadata).
type rolloutTraffic struct {
	writes, conflicts     int
	codes                 map[string]int // the writes by HTTP code
	watchEvents, reads    int
	watchBytes, readBytes float64
	// The Nodes' watch events (every agent with rollouts enabled watches
	// every Node's metadata) and their bytes.
	nodeEvents int
	nodeBytes  float64
}

func (t rolloutTraffic) minus(o rolloutTraffic) rolloutTraffic {
	codes := map[string]int{}
	for c, n := range t.codes {
		if d := n - o.codes[c]; d != 0 {
			codes[c] = d
		}
	}
	return rolloutTraffic{writes: t.writes - o.writes, conflicts: t.conflicts - o.conflicts, codes: codes,
		watchEvents: t.watchEvents - o.watchEvents, reads: t.reads - o.reads,
		watchBytes: t.watchBytes - o.watchBytes, readBytes: t.readBytes - o.readBytes,
		nodeEvents: t.nodeEvents - o.nodeEvents, nodeBytes: t.nodeBytes - o.nodeBytes}
}

func mib(b float64) float64 { return b / (1 << 20) }

// rolloutRequests reads rolloutTraffic from the API server's /metrics.
func rolloutRequests(ctx context.Context, b *bench) (rolloutTraffic, error) {
	body, err := b.c.Client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return rolloutTraffic{}, fmt.Errorf("reading /metrics: %w", err)
	}
	t := rolloutTraffic{codes: map[string]int{}}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		name, rest, ok := strings.Cut(line, "{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		nodes := label(labels, "resource") == "nodes" && label(labels, "group") == ""
		ours := label(labels, "resource") == rollout.GVR.Resource
		verb, sub := label(labels, "verb"), label(labels, "subresource")
		read := ours && (verb == "GET" || verb == "LIST")
		write := ours && sub == "status" && !read && verb != "WATCH"
		if !(name == "apiserver_request_total" && (read || write) || name == "apiserver_response_sizes_sum" && read ||
			strings.HasPrefix(name, "apiserver_watch_events_") && (ours || nodes)) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return t, fmt.Errorf("the API server's /metrics: %q: %w", line, err)
		}
		switch {
		case name == "apiserver_request_total" && write:
			t.writes += int(v)
			t.codes[label(labels, "code")] += int(v)
			if label(labels, "code") == "409" {
				t.conflicts += int(v)
			}
		case name == "apiserver_request_total":
			t.reads += int(v)
		case name == "apiserver_response_sizes_sum":
			t.readBytes += v
		case name == "apiserver_watch_events_total" && nodes:
			t.nodeEvents += int(v)
		case name == "apiserver_watch_events_sizes_sum" && nodes:
			t.nodeBytes += v
		case name == "apiserver_watch_events_total":
			t.watchEvents += int(v)
		case name == "apiserver_watch_events_sizes_sum":
			t.watchBytes += v
		}
	}
	return t, sc.Err()
}

// byCode is "200: 12, 409: 3", codes in order.
func byCode(codes map[string]int) string {
	var out []string
	for _, c := range slices.Sorted(maps.Keys(codes)) {
		out = append(out, fmt.Sprintf("%s: %d", c, codes[c]))
	}
	return strings.Join(out, ", ")
}
