package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kustodian/kustodian/test/agentproc"
	"github.com/kustodian/kustodian/test/cluster"
)

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
	agents, _, err := auditCalls(path, offset)
	return agents, err
}

// auditCalls counts, in the audit log from offset on, the agents' requests
// by "verb resource[/subresource]", and the simulated kubelets' node-Lease
// writes (kwok renews each Node's Lease in kube-node-lease as a kubelet
// does, every 10 s): the load every cluster carries, Kustodian's baseline.
func auditCalls(path string, offset int64) (agents map[string]int, kubelets int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, fmt.Errorf("audit log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, 0, err
	}
	agents = map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Stage     string `json:"stage"`
			Verb      string `json:"verb"`
			UserAgent string `json:"userAgent"`
			ObjectRef *struct {
				Resource    string `json:"resource"`
				Subresource string `json:"subresource"`
				Namespace   string `json:"namespace"`
			} `json:"objectRef"`
			RequestURI string `json:"requestURI"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil || ev.Stage == "ResponseStarted" {
			// A watch is logged when its response starts and again when
			// it ends: it is one request.
			continue
		}
		if ev.ObjectRef != nil && ev.ObjectRef.Namespace == "kube-node-lease" && ev.ObjectRef.Resource == "leases" &&
			(ev.Verb == "update" || ev.Verb == "patch" || ev.Verb == "create") {
			kubelets++
			continue
		}
		if !strings.HasPrefix(ev.UserAgent, "kustodian-agent") {
			continue
		}
		what := ev.RequestURI
		if ev.ObjectRef != nil {
			what = ev.ObjectRef.Resource
			if ev.ObjectRef.Subresource != "" {
				what += "/" + ev.ObjectRef.Subresource
			}
		}
		agents[ev.Verb+" "+what]++
	}
	return agents, kubelets, sc.Err()
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

// freshCluster starts a control plane of copts anew (the audit policy
// applies from its start) and waits until its nodes are ready, within
// ready; stop takes it down unless --keep-cluster.
func freshCluster(ctx context.Context, o options, copts cluster.Options, ready time.Duration) (c *cluster.Cluster, stop func(), err error) {
	_ = cluster.Down(ctx, copts)
	if c, err = cluster.Up(ctx, copts); err != nil {
		return nil, nil, err
	}
	stop = func() {}
	if !o.keepCluster {
		stop = func() { _ = cluster.Down(context.Background(), copts) }
	}
	if err := cluster.Eventually(ctx, ready, func(ctx context.Context) error { return nodesReady(ctx, c.Client, copts.Nodes) }); err != nil {
		stop()
		return nil, nil, err
	}
	return c, stop, nil
}
