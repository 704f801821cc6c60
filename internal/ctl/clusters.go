package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kustodian/kustodian/internal/fleet"
	"github.com/kustodian/kustodian/internal/status"
)

// Many clusters from one seat: the commands that read (status, queue,
// plan, history, rollout status) and those that steer a rollout take
// --context A,B, --all-contexts or --fleet FILE, read the clusters in
// parallel (at most clusterParallelism at once, each within
// clusterTimeout), and show a cluster that cannot be read as such.

// clusterParallelism is how many clusters are read at once.
const clusterParallelism = 8

// clusterTimeout bounds the reading of one cluster, so that one that does
// not answer holds up no other.
var clusterTimeout = 30 * time.Second

// annotationClusters marks a command that works on several clusters.
const annotationClusters = "kustodian.io/clusters"

// manyClusters marks cmd as one that takes --context A,B, --all-contexts
// and --fleet.
func manyClusters(cmd *cobra.Command) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[annotationClusters] = "many"
	return cmd
}

// clusterFlags are the root's flags that name several clusters.
type clusterFlags struct {
	allContexts bool
	fleetFile   string
}

func (f *clusterFlags) add(cmd *cobra.Command) {
	cmd.PersistentFlags().BoolVar(&f.allContexts, "all-contexts", false, "work on every context of the kubeconfig, one cluster each (status, queue, plan, history, rollout)")
	cmd.PersistentFlags().StringVar(&f.fleetFile, "fleet", "", "work on the contexts of this Fleet file, ring by ring (status, queue, plan, history, rollout; docs/fleet.md)")
}

// multi tells whether the flags name several clusters: a --context list,
// --all-contexts or --fleet.
func (o *options) multi() bool {
	return o.clusters.allContexts || o.clusters.fleetFile != "" || strings.Contains(o.overrides.CurrentContext, ",")
}

// checkClusters refuses several clusters to a command that works on one.
func (o *options) checkClusters(cmd *cobra.Command) error {
	if !o.multi() || cmd.Annotations[annotationClusters] == "many" {
		return nil
	}
	return fmt.Errorf("%s works on one cluster: give --context NAME (not a list, --all-contexts or --fleet); status, queue, plan, history and rollout work on several", cmd.CommandPath())
}

// clusterTarget is one cluster of several: its kubeconfig context, and the
// options that reach it.
type clusterTarget struct {
	context string
	ring    string // its ring, with --fleet
	o       *options
}

// targets are the clusters the flags name, in their order (--fleet: ring
// by ring), with the Fleet of --fleet.
func (o *options) targets() ([]clusterTarget, *fleet.Fleet, error) {
	set := 0
	for _, given := range []bool{o.clusters.allContexts, o.clusters.fleetFile != "", o.overrides.CurrentContext != ""} {
		if given {
			set++
		}
	}
	if set > 1 {
		return nil, nil, fmt.Errorf("--context, --all-contexts and --fleet each name the clusters: give one of them")
	}
	// What would apply to every context alike is refused: each context
	// says its own server and credentials.
	ov := o.overrides
	for flag, given := range map[string]bool{"--server": ov.ClusterInfo.Server != "", "--token": ov.AuthInfo.Token != "",
		"--user": ov.Context.AuthInfo != "", "--cluster": ov.Context.Cluster != "", "--username": ov.AuthInfo.Username != "",
		"--client-certificate": ov.AuthInfo.ClientCertificate != "", "--certificate-authority": ov.ClusterInfo.CertificateAuthority != ""} {
		if given {
			return nil, nil, fmt.Errorf("%s with several clusters would apply to every one of them: put it in each context of the kubeconfig instead", flag)
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	cfg, err := rules.Load()
	if err != nil {
		return nil, nil, kubeconfigError(err)
	}
	var names []string
	var fl *fleet.Fleet
	switch {
	case o.clusters.fleetFile != "":
		if fl, err = fleet.Load(o.clusters.fleetFile); err != nil {
			return nil, nil, err
		}
		names = fl.Contexts()
	case o.clusters.allContexts:
		for name := range cfg.Contexts {
			names = append(names, name)
		}
		sort.Strings(names)
		if len(names) == 0 {
			return nil, nil, fmt.Errorf("--all-contexts: the kubeconfig has no context (kubectl config get-contexts)")
		}
	default:
		seen := map[string]bool{}
		for _, n := range strings.Split(o.overrides.CurrentContext, ",") {
			n = strings.TrimSpace(n)
			if n == "" || seen[n] {
				return nil, nil, fmt.Errorf("--context %s: name each context once, separated by commas", o.overrides.CurrentContext)
			}
			seen[n] = true
			names = append(names, n)
		}
	}
	var out []clusterTarget
	for _, name := range names {
		if _, ok := cfg.Contexts[name]; !ok {
			where := "--context"
			if fl != nil {
				where = o.clusters.fleetFile
			}
			return nil, nil, fmt.Errorf("%s: no context %q in the kubeconfig (kubectl config get-contexts lists them)", where, name)
		}
		c := *o
		c.overrides.CurrentContext = name
		c.clusters = clusterFlags{}
		t := clusterTarget{context: name, o: &c}
		if fl != nil {
			t.ring = fl.Rings[fl.RingOf(name)].Name
		}
		out = append(out, t)
	}
	return out, fl, nil
}

// clusterResult is what was read of one cluster: its value, or why it
// could not be read.
type clusterResult[T any] struct {
	clusterTarget
	value T
	err   error
}

// eachCluster reads every target with read, at most clusterParallelism
// at once, each within clusterTimeout; the results are in the targets'
// order. What read writes on stderr is prefixed with the cluster.
func eachCluster[T any](ctx context.Context, ts []clusterTarget, read func(context.Context, *options) (T, error)) []clusterResult[T] {
	out := make([]clusterResult[T], len(ts))
	sem := make(chan struct{}, clusterParallelism)
	var wg sync.WaitGroup
	errOut := &lockedWriter{w: ts[0].o.streams.ErrOut}
	for i, t := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			c := *t.o
			c.streams.ErrOut = &prefixWriter{w: errOut, prefix: "cluster " + t.context + ": "}
			rctx, cancel := context.WithTimeout(ctx, clusterTimeout)
			defer cancel()
			v, err := read(rctx, &c)
			if err != nil && rctx.Err() != nil && ctx.Err() == nil {
				err = fmt.Errorf("no answer within %s: %w", clusterTimeout, err)
			}
			out[i] = clusterResult[T]{clusterTarget: t, value: v, err: err}
		}()
	}
	wg.Wait()
	return out
}

// lockedWriter lets the clusters' readers write one line at a time.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// prefixWriter starts each line with prefix.
type prefixWriter struct {
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.buf = append(p.buf, b...)
	for {
		i := bytes.IndexByte(p.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		if _, err := p.w.Write(append([]byte(p.prefix), p.buf[:i+1]...)); err != nil {
			return 0, err
		}
		p.buf = p.buf[i+1:]
	}
}

// unreachable is one line per cluster that could not be read.
func unreachable[T any](rs []clusterResult[T]) []string {
	var out []string
	for _, r := range rs {
		if r.err != nil {
			out = append(out, fmt.Sprintf("cluster %s: %s", r.context, notRead(r.err)))
		}
	}
	return out
}

// notRead says why a cluster could not be read: "unreachable" when the
// API server did not answer, else the error.
func notRead(err error) string {
	msg := oneLine(err)
	for _, s := range []string{"connection refused", "no such host", "i/o timeout", "no answer within", "connection reset", "network is unreachable", "no route to host"} {
		if strings.Contains(msg, s) {
			return "unreachable: " + msg
		}
	}
	return "cannot be read: " + msg
}

// allFailed is an error when no cluster could be read.
func allFailed[T any](rs []clusterResult[T]) error {
	for _, r := range rs {
		if r.err == nil {
			return nil
		}
	}
	return fmt.Errorf("no cluster could be read: %s", strings.Join(unreachable(rs), "; "))
}

// ClusterList is what -o json|yaml prints over several clusters: one item
// per cluster, the document the command prints for one cluster with its
// context in cluster (and, with --fleet, its ring), or, for a cluster
// that could not be read, error instead.
type ClusterList struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Items      []map[string]any `json:"items"`
}

// clusterList makes the list of kind (the one cluster's kind) from each
// cluster's document.
func clusterList[T any](kind string, rs []clusterResult[T], doc func(T) any) (ClusterList, error) {
	l := ClusterList{APIVersion: status.APIVersion, Kind: kind + "List", Items: []map[string]any{}}
	for _, r := range rs {
		item := map[string]any{}
		if r.err != nil {
			item["error"] = oneLine(r.err)
		} else {
			b, err := json.Marshal(doc(r.value))
			if err != nil {
				return l, err
			}
			if err := json.Unmarshal(b, &item); err != nil {
				return l, err
			}
		}
		item["cluster"] = r.context
		if r.ring != "" {
			item["ring"] = r.ring
		}
		l.Items = append(l.Items, item)
	}
	return l, nil
}

// printClusters prints over several clusters in the output format: the
// list of documents (-o json|yaml|jsonpath), or one table of the rows
// each cluster's table printer writes, with CLUSTER first, then what each
// printed besides its rows and the clusters that could not be read.
// empty is said when no cluster has a row.
func printClusters[T any](w io.Writer, out *output, kind string, rs []clusterResult[T], doc func(T) any, table func(io.Writer, T) error, empty string) error {
	if err := allFailed(rs); err != nil {
		return err
	}
	if out.Picture() {
		return fmt.Errorf("-o %s draws one cluster: give --context NAME", out.Format)
	}
	if !out.Table() {
		if out.Format == outputName {
			return fmt.Errorf("-o name over several clusters would name objects without their cluster; use -o json, or -o jsonpath='{range .items[*]}{.cluster}{\"\\n\"}{end}'")
		}
		l, err := clusterList(kind, rs, doc)
		if err != nil {
			return err
		}
		return out.Print(w, l, nil)
	}
	var tables []clusterTable
	for _, r := range rs {
		if r.err != nil {
			continue
		}
		var buf rawTable
		if err := table(&buf, r.value); err != nil {
			return fmt.Errorf("cluster %s: %w", r.context, err)
		}
		tables = append(tables, clusterTable{cluster: r.context, text: buf.String()})
	}
	notes, rows := mergeTables(w, tables, !out.NoHeaders)
	if rows == 0 && empty != "" {
		fmt.Fprintln(w, empty)
	}
	notes = append(notes, unreachable(rs)...)
	if len(notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range notes {
			fmt.Fprintln(w, n)
		}
	}
	return nil
}

// rawTable collects a table printer's rows without aligning them (see
// newTable), to be aligned with other clusters' rows.
type rawTable struct{ bytes.Buffer }

// tableWriter is a table being written: aligned when flushed.
type tableWriter interface {
	io.Writer
	Flush() error
}

// newTable is the table writer of the table printers: a tabwriter, or, for
// a rawTable, the rows as they are (tab-separated).
func newTable(w io.Writer) tableWriter {
	if r, ok := w.(*rawTable); ok {
		return rawFlusher{r}
	}
	return tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
}

type rawFlusher struct{ io.Writer }

func (rawFlusher) Flush() error { return nil }

// clusterTable is what one cluster's table printer wrote.
type clusterTable struct{ cluster, text string }

// mergeTables writes the rows of every cluster's table as one table with
// CLUSTER first (the header once, when headers), and returns the other
// lines each printed (a summary, a note), each prefixed with its cluster.
func mergeTables(w io.Writer, tables []clusterTable, headers bool) (notes []string, rows int) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	header := ""
	for _, t := range tables {
		first := true
		for _, line := range strings.Split(strings.TrimRight(t.text, "\n"), "\n") {
			switch {
			case strings.Contains(line, "\t") && first && headers:
				if header == "" {
					header = line
					fmt.Fprintln(tw, "CLUSTER\t"+line)
				}
			case strings.Contains(line, "\t"):
				fmt.Fprintln(tw, t.cluster+"\t"+line)
				rows++
			case strings.TrimSpace(line) != "":
				notes = append(notes, "cluster "+t.cluster+": "+line)
			}
			if strings.Contains(line, "\t") {
				first = false
			}
		}
	}
	tw.Flush()
	return notes, rows
}
