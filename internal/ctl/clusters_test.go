package ctl

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/status"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

var t0 = time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)

func TestRowsOfManyClustersAreOneTableWithClusterFirst(t *testing.T) {
	var a, b rawTable
	for _, c := range []struct {
		w    *rawTable
		rows []QueueEntry
	}{{&a, []QueueEntry{{Position: 1, Node: "n1", Live: true}}}, {&b, []QueueEntry{{Position: 1, Node: "a-much-longer-node-name", Live: true}, {Position: 2, Node: "n2", Live: true}}}} {
		printQueue(c.w, QueueList{Items: c.rows}, t0, false, false, true)
	}
	var out bytes.Buffer
	notes, rows := mergeTables(&out, []clusterTable{{"one", a.String() + "a summary\n"}, {"two", b.String()}}, true)
	want := `CLUSTER  POSITION  NODE                     GROUP  WAITING  ETA  LIVE
one      1         n1                       -      0s       -    yes
two      1         a-much-longer-node-name  -      0s       -    yes
two      2         n2                       -      0s       -    yes
`
	if out.String() != want {
		t.Errorf("merged table:\n%s\nwant:\n%s", out.String(), want)
	}
	if rows != 3 || len(notes) != 1 || notes[0] != "cluster one: a summary" {
		t.Errorf("rows %d, notes %q", rows, notes)
	}
}

func TestAClusterThatCannotBeReadIsShownNotDropped(t *testing.T) {
	rs := []clusterResult[QueueList]{
		{clusterTarget: clusterTarget{context: "one"}, value: QueueList{Kind: "MaintenanceQueue", Items: []QueueEntry{{Position: 1, Node: "n1"}}}},
		{clusterTarget: clusterTarget{context: "two", ring: "prod"}, err: errors.New(`Get "https://127.0.0.1:1/api": dial tcp 127.0.0.1:1: connect: connection refused`)},
	}
	var out bytes.Buffer
	err := printClusters(&out, &output{Format: outputJSON}, "MaintenanceQueue", rs, func(q QueueList) any { return q }, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"kind": "MaintenanceQueueList"`, `"cluster": "one"`, `"node": "n1"`, `"cluster": "two"`, `"ring": "prod"`, `"error": "Get \"https://127.0.0.1:1/api\": dial tcp 127.0.0.1:1: connect: connection refused"`} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("-o json lacks %s:\n%s", s, out.String())
		}
	}
	out.Reset()
	err = printClusters(&out, &output{}, "MaintenanceQueue", rs, nil, func(w io.Writer, q QueueList) error {
		printQueue(w, q, t0, false, false, true)
		return nil
	}, "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "cluster two: unreachable: Get") {
		t.Errorf("table lacks the unreachable cluster:\n%s", out.String())
	}
	rs[0].err = errors.New("forbidden")
	if err := printClusters(&out, &output{}, "MaintenanceQueue", rs, nil, nil, ""); err == nil || !strings.Contains(err.Error(), "no cluster could be read") {
		t.Errorf("all unread: %v", err)
	}
}

func TestPrefixWriterPrefixesWholeLines(t *testing.T) {
	var out bytes.Buffer
	p := &prefixWriter{w: &out, prefix: "cluster a: "}
	p.Write([]byte("warning: one\nwarn"))
	p.Write([]byte("ing: two\n"))
	if out.String() != "cluster a: warning: one\ncluster a: warning: two\n" {
		t.Errorf("%q", out.String())
	}
}

const twoContexts = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: t}
contexts:
- name: stage-eu
  context: {cluster: c, user: u}
- name: prod-eu
  context: {cluster: c, user: u}
`

func TestTargetsAreTheContextsNamed(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "config")
	if err := os.WriteFile(kc, []byte(twoContexts), 0o600); err != nil {
		t.Fatal(err)
	}
	fleetFile := filepath.Join(dir, "europe.yaml")
	if err := os.WriteFile(fleetFile, []byte("apiVersion: kustodian.io/v1alpha1\nkind: Fleet\nrings:\n- {name: staging, contexts: [stage-eu]}\n- {name: prod, contexts: [prod-eu]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	names := func(o *options) (string, error) {
		ts, _, err := o.targets()
		var got []string
		for _, t := range ts {
			got = append(got, t.context+"@"+t.ring)
		}
		return strings.Join(got, ","), err
	}
	for _, c := range []struct {
		set        func(*options)
		want, says string
	}{
		{func(o *options) { o.overrides.CurrentContext = "prod-eu,stage-eu" }, "prod-eu@,stage-eu@", ""},
		{func(o *options) { o.clusters.allContexts = true }, "prod-eu@,stage-eu@", ""},
		{func(o *options) { o.clusters.fleetFile = fleetFile }, "stage-eu@staging,prod-eu@prod", ""},
		{func(o *options) { o.overrides.CurrentContext = "prod-eu,nowhere" }, "", `--context: no context "nowhere" in the kubeconfig`},
		{func(o *options) { o.overrides.CurrentContext = "prod-eu,prod-eu" }, "", "name each context once"},
		{func(o *options) { o.clusters.allContexts, o.clusters.fleetFile = true, fleetFile }, "", "give one of them"},
		{func(o *options) { o.clusters.allContexts, o.overrides.ClusterInfo.Server = true, "https://127.0.0.1:2" }, "", "--server with several clusters would apply to every one"},
	} {
		o := &options{kubeconfig: kc}
		c.set(o)
		got, err := names(o)
		if c.says != "" {
			if err == nil || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%+v: error %v, want one saying %q", o.clusters, err, c.says)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("targets %s, %v; want %s", got, err, c.want)
		}
	}
}

func TestACommandOfOneClusterRefusesMany(t *testing.T) {
	root := NewRoot(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: &bytes.Buffer{}}, "kustodian-ctl")
	root.SetArgs([]string{"pause", "--context", "a,b"})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "kustodian-ctl pause works on one cluster") {
		t.Errorf("pause over two contexts: %v", err)
	}
	var many []string
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Annotations[annotationClusters] == "many" {
			many = append(many, c.CommandPath())
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	if got := strings.Join(many, ", "); !strings.Contains(got, "kustodian-ctl status") || !strings.Contains(got, "kustodian-ctl history") {
		t.Errorf("commands over many clusters: %s", got)
	}
}

func TestTheFleetViewsDocumentChangesOnlyWithTheClusters(t *testing.T) {
	read := func(at time.Time, state lock.State) []clusterResult[status.MaintenanceStatus] {
		return []clusterResult[status.MaintenanceStatus]{{clusterTarget: clusterTarget{context: "one"},
			value: status.MaintenanceStatus{Time: at, Nodes: []status.Node{{Name: "n1", State: state}}}}}
	}
	if statusesKey(read(t0, lock.Waiting)) != statusesKey(read(t0.Add(time.Minute), lock.Waiting)) {
		t.Error("the time alone changed the key")
	}
	if statusesKey(read(t0, lock.Waiting)) == statusesKey(read(t0, lock.Draining)) {
		t.Error("a node's state did not change the key")
	}
}
