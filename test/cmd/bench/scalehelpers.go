package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

type watchFigures struct{ events, bytes float64 }

// watchMetrics sums the API server's watch events sent for Leases, and
// their sizes.
func watchMetrics(ctx context.Context, b *bench) (watchFigures, error) {
	body, err := b.c.Client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return watchFigures{}, fmt.Errorf("reading /metrics: %w", err)
	}
	var f watchFigures
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		isLease := strings.Contains(line, `group="coordination.k8s.io"`) &&
			(strings.Contains(line, `kind="Lease"`) || strings.Contains(line, `resource="leases"`))
		if !isLease {
			continue
		}
		_, value, ok := strings.Cut(line, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(line, "apiserver_watch_events_total{"):
			f.events += v
		case strings.HasPrefix(line, "apiserver_watch_events_sizes_sum{"):
			f.bytes += v
		}
	}
	return f, sc.Err()
}

func printScale(rs []scaleResult, heartbeat time.Duration) {
	fmt.Printf("\nscale: N agents in one process, all waiting behind one holder (heartbeat %s): the steady state over %s, then handoffs with empty scripts\n", heartbeat, rs[0].window.Round(time.Second))
	row := func(name string, f func(r scaleResult) string) {
		fmt.Printf("  %-46s", name)
		for _, r := range rs {
			fmt.Printf(" %14s", f(r))
		}
		fmt.Println()
	}
	row("", func(r scaleResult) string { return fmt.Sprintf("N=%d", r.n) })
	per := func(v float64, r scaleResult) float64 { return v / r.window.Seconds() }
	total := func(r scaleResult) int {
		t := 0
		for _, v := range r.calls {
			t += v
		}
		return t
	}
	row("agents' API requests/s (audit log)", func(r scaleResult) string { return fmt.Sprintf("%.1f", per(float64(total(r)), r)) })
	var keys []string
	seen := map[string]bool{}
	for _, r := range rs {
		for k := range r.calls {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		row("  "+k, func(r scaleResult) string { return fmt.Sprintf("%.2f", per(float64(r.calls[k]), r)) })
	}
	row("  per agent", func(r scaleResult) string { return fmt.Sprintf("%.3f", per(float64(total(r)), r)/float64(r.n)) })
	row("kubelets' node-Lease writes/s (the baseline)", func(r scaleResult) string { return fmt.Sprintf("%.1f", per(float64(r.kubelets), r)) })
	row("  agents' requests / kubelets' writes", func(r scaleResult) string {
		if r.kubelets == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", float64(total(r))/float64(r.kubelets))
	})
	row("watch events/s sent for Leases", func(r scaleResult) string { return fmt.Sprintf("%.1f", per(r.watchEvents, r)) })
	row("  per agent", func(r scaleResult) string { return fmt.Sprintf("%.2f", per(r.watchEvents, r)/float64(r.n)) })
	row("  KiB/s", func(r scaleResult) string { return fmt.Sprintf("%.1f", per(r.watchBytes, r)/1024) })
	row("CPU per agent (ms per s)", func(r scaleResult) string {
		return fmt.Sprintf("%.2f", float64(r.cpu.Microseconds())/1000/r.window.Seconds()/float64(r.n))
	})
	row("API server CPU (cores)", func(r scaleResult) string { return fmt.Sprintf("%.2f", r.apiCPU.Seconds()/r.window.Seconds()) })
	row("API server memory (max RSS, MiB)", func(r scaleResult) string { return fmt.Sprintf("%.0f", float64(r.apiRSS)/(1<<20)) })
	row("etcd CPU (cores)", func(r scaleResult) string { return fmt.Sprintf("%.2f", r.etcCPU.Seconds()/r.window.Seconds()) })
	row("memory per agent (swarm RSS / N, MiB)", func(r scaleResult) string { return fmt.Sprintf("%.2f", float64(r.rss)/float64(r.n)/(1<<20)) })
	row("handoff release → grant, median", func(r scaleResult) string { return pct(r.handoffs, 50) })
	row("handoff release → grant, p99", func(r scaleResult) string { return pct(r.handoffs, 99) })
	row("  release seen outside the swarm, median", func(r scaleResult) string { return pct(r.releaseSeen, 50) })
	row("  release seen outside the swarm, p99", func(r scaleResult) string { return pct(r.releaseSeen, 99) })
	row("cycle per node (grant → next grant), median", func(r scaleResult) string { return pct(r.cycles, 50) })
	row("first release → last grant measured", func(r scaleResult) string { return round(r.span).String() })
	row("handoffs measured (of those asked for)", func(r scaleResult) string { return fmt.Sprintf("%d of %d", len(r.handoffs), r.want) })
}

// pct is the p-th percentile (nearest rank).
func pct(d []time.Duration, p int) string {
	if len(d) == 0 {
		return "-"
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (p*len(s) + 99) / 100
	i = min(max(i, 1), len(s)) - 1
	return round(s[i]).String()
}

// cpuTime is a process's user and system time so far (from /proc).
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command may hold spaces: the fields start after its ")".
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticks
}

// waitCount waits until the file holds at least n lines containing s.
func waitCount(ctx context.Context, path, s string, n int, timeout time.Duration) error {
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return false, err
		}
		return bytes.Count(b, []byte(s)) >= n, nil
	})
}

// raiseInotify makes room for n inotify instances (fs.inotify.max_user_instances).
func raiseInotify(n int) error {
	const knob = "/proc/sys/fs/inotify/max_user_instances"
	b, err := os.ReadFile(knob)
	if err != nil {
		return err
	}
	cur, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || cur >= n {
		return err
	}
	fmt.Printf("scale: raising %s from %d to %d (each agent watches its host files)\n", knob, cur, n)
	if err := os.WriteFile(knob, []byte(strconv.Itoa(n)), 0o644); err != nil {
		return fmt.Errorf("%s: %w (run as root, or raise it yourself)", knob, err)
	}
	return nil
}

// parallel runs f(0..n-1) at most width at a time; the first error wins.
func parallel(ctx context.Context, n, width int, f func(i int) error) error {
	sem := make(chan struct{}, width)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := f(i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}
