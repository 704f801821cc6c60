package integration

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// A rollout every node refuses at once (signed by a key no host trusts)
// costs each node one Event and a bounded number of status writes, however
// the nodes' writes meet: the entries of different nodes never conflict,
// and a node whose summary meets another's write leaves the summary to
// that writer instead of trying again. Before, each conflict retried the
// Event and the write together: 6 nodes made 23 Events.
//
// Not parallel: it counts the API server's requests for the rollouts'
// status subresource, which no other test may make meanwhile.
func TestFleetRefusalCostsOneEventAndFewWritesPerNode(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(6)
	nodecreds.Install(e, e.Namespace)
	key, stranger := nodecreds.NewRolloutKey(t), nodecreds.NewRolloutKey(t)
	rolloutAgents(t, e, nodes, key)
	// The summary counts the nodes whose hosts run rollouts as its writer
	// sees their labels: every agent has labelled its Node first.
	e.Eventually("every agent to label its Node "+rollout.LabelRollouts, cluster.DefaultTimeout, func(ctx context.Context) error {
		for _, n := range nodes {
			node, err := e.Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if node.Labels[rollout.LabelRollouts] != "enabled" {
				return fmt.Errorf("node %s has no label %s=enabled yet", n, rollout.LabelRollouts)
			}
		}
		return nil
	})
	script := writeScript(t, "true\n")
	dyn := dynamicClient(t, e)
	before := statusWrites(e)
	if out, err := nodecreds.CtlFor(e).Run(e.Ctx, "rollout", "create", "stranger", "--script", script, "--stage", "all", "--key", stranger.Private); err != nil {
		t.Fatalf("rollout create: %v\n%s", err, out)
	}
	waitEntries(e, dyn, "stranger", "every node refusing the rollout", func(got map[string]rollout.NodeStatus) error {
		for _, n := range nodes {
			if got[n].State != rollout.Refused {
				return fmt.Errorf("node %s: %s %q, want Refused", n, got[n].State, got[n].Message)
			}
		}
		return nil
	})
	// The summary follows the last entry: its counts say six refused.
	e.Eventually("the stored summary to count the six refusals", cluster.DefaultTimeout, func(context.Context) error {
		r := getRollout(e, dyn, "stranger")
		if r.Status.Counts.Refused != len(nodes) {
			return fmt.Errorf("status.counts says %d refused, want %d (%+v)", r.Status.Counts.Refused, len(nodes), r.Status.Counts)
		}
		return nil
	})
	// An agent records its Event just after its entry's write: wait until
	// every node has one, then no node may have more.
	per := map[string]int{}
	e.Eventually("a RolloutRefused Event for every node", cluster.DefaultTimeout, func(ctx context.Context) error {
		evs, err := e.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "reason=RolloutRefused"})
		if err != nil {
			return err
		}
		per = map[string]int{}
		for _, ev := range evs.Items {
			if strings.Contains(ev.Message, "rollout stranger ") {
				per[ev.InvolvedObject.Name] += max(1, int(ev.Count))
			}
		}
		for _, n := range nodes {
			if per[n] == 0 {
				return fmt.Errorf("node %s has recorded no RolloutRefused Event yet (all: %v)", n, per)
			}
		}
		return nil
	})
	for _, n := range nodes {
		if per[n] != 1 {
			t.Errorf("node %s recorded %d RolloutRefused Events, want 1 (all: %v)", n, per[n], per)
		}
	}
	after := statusWrites(e)
	writes, conflicts := after.all-before.all, after.conflicts-before.conflicts
	t.Logf("%d nodes refusing at once: %d status writes, %d of them refused with a conflict", len(nodes), writes, conflicts)
	if limit := 2 * len(nodes); writes > limit {
		t.Errorf("%d status writes for %d refusals (%d conflicts), want at most %d: an entry and a summary per node", writes, len(nodes), conflicts, limit)
	}
}

type writeCounts struct{ all, conflicts int }

// statusWrites counts the API server's requests that wrote the status of
// MaintenanceRollouts (any verb but reads), from its own metrics.
func statusWrites(e *cluster.Env) writeCounts {
	e.T.Helper()
	body, err := e.Client.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(e.Ctx)
	if err != nil {
		e.T.Fatalf("reading the API server's /metrics: %v", err)
	}
	var c writeCounts
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="maintenancerollouts"`) ||
			!strings.Contains(line, `subresource="status"`) {
			continue
		}
		if strings.Contains(line, `verb="GET"`) || strings.Contains(line, `verb="LIST"`) || strings.Contains(line, `verb="WATCH"`) {
			continue
		}
		_, value, _ := strings.Cut(line, "} ")
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			e.T.Fatalf("the API server's /metrics: %q: %v", line, err)
		}
		c.all += int(v)
		if strings.Contains(line, `code="409"`) {
			c.conflicts += int(v)
		}
	}
	if err := sc.Err(); err != nil {
		e.T.Fatal(err)
	}
	return c
}
