package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// planDoc is what the test reads of `plan -o json`, decoded here.
type planDoc struct {
	Start          time.Time `json:"start"`
	HandoffSeconds float64   `json:"handoffSeconds"`
	Windows        []struct {
		Policy      string    `json:"policy"`
		Closes      time.Time `json:"closes"`
		Fits        bool      `json:"fits"`
		FirstLate   string    `json:"firstLate"`
		OverSeconds int64     `json:"overSeconds"`
		Late        int       `json:"late"`
	} `json:"windows"`
	Items []struct {
		Node             string     `json:"node"`
		Start            *time.Time `json:"start"`
		End              *time.Time `json:"end"`
		EstimateSource   string     `json:"estimateSource"`
		RefusedEvictions []struct {
			Pod    string `json:"pod"`
			Reason string `json:"reason"`
		} `json:"refusedEvictions"`
	} `json:"items"`
	Summary string `json:"summary"`
}

// pdb makes a PodDisruptionBudget over app's pods that allows maxUnavailable.
func pdb(t *testing.T, e *cluster.Env, name, app string, maxUnavailable int32) {
	t.Helper()
	mu := intstr.FromInt32(maxUnavailable)
	p := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.Namespace},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: &mu, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}
	if _, err := e.Client.PolicyV1().PodDisruptionBudgets(e.Namespace).Create(e.Ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// plan names, before anything is cordoned, the pods whose eviction the API
// server refuses: one under a budget that allows no disruption, and one
// that two budgets cover (each allowing a disruption: arithmetic on the
// budgets would let it go; the Eviction API refuses a pod with two). It
// predicts each node's start and end from its history and the window's
// overrun. Nothing is changed: no cordon, no pod evicted, no budget spent.
func TestPlanNamesBlockedPodsAndTheWindowOverrun(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodecreds.Install(e, e.Namespace)
	nodes := e.Nodes(3)
	stuck := stuckPods(t, e, e.Namespace, "web", nodes[0], 2)
	twice := runPodsOn(t, e, e.Namespace, "twice", nodes[1], 1)
	pdb(t, e, "twice-a", "twice", 1)
	pdb(t, e, "twice-b", "twice", 1)
	free := runPodsOn(t, e, e.Namespace, "free", nodes[2], 1)
	pdb(t, e, "free", "free", 1)
	e.Eventually("every budget computed by the disruption controller", cluster.DefaultTimeout, func(ctx context.Context) error {
		list, err := e.Client.PolicyV1().PodDisruptionBudgets(e.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		want := map[string]int32{"web": 0, "twice-a": 1, "twice-b": 1, "free": 1}
		for _, p := range list.Items {
			if p.Status.ObservedGeneration != p.Generation || p.Status.DisruptionsAllowed != want[p.Name] {
				return fmt.Errorf("%s: observed generation %d of %d, %d disruptions allowed", p.Name, p.Status.ObservedGeneration, p.Generation, p.Status.DisruptionsAllowed)
			}
			delete(want, p.Name)
		}
		if len(want) > 0 {
			return fmt.Errorf("budgets missing: %v", want)
		}
		return nil
	})

	// Every node's last maintenance, yesterday, held its lock 10 minutes.
	for _, n := range nodes {
		y := time.Now().UTC().Add(-24 * time.Hour).Truncate(time.Second)
		h := fmt.Sprintf(`[{"requested":%q,"started":%q,"drained":%q,"ended":%q,"result":"succeeded","policy":"tonight"}]`,
			y.Format(time.RFC3339), y.Format(time.RFC3339), y.Add(time.Minute).Format(time.RFC3339), y.Add(10*time.Minute).Format(time.RFC3339))
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{"kustodian.io/history": h}}})
		if _, err := e.Client.CoreV1().Nodes().Patch(e.Ctx, n, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A window open since an hour ago that closes 25 minutes after this
	// minute began: three nodes of 10 minutes, one after the other, need
	// 30.
	now := time.Now().UTC()
	closes := now.Truncate(time.Minute).Add(25 * time.Minute)
	if err := e.ApplyPolicy(fmt.Sprintf(`{metadata: {name: tonight}, spec: {nodeSelector: {matchLabels: {%s: %s}}, windows: [{start: %q, end: %q, timeZone: UTC}]}}`,
		cluster.LabelTestEnv, e.ID, now.Add(-time.Hour).Format("15:04"), closes.Format("15:04"))); err != nil {
		t.Fatal(err)
	}

	out := mustCtl(t, e, "plan", "--policy", "tonight", "-o", "json")
	var p planDoc
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("plan -o json: %v\n%s", err, out)
	}
	refused := map[string][]string{}
	var order []string
	for _, it := range p.Items {
		order = append(order, it.Node)
		for _, r := range it.RefusedEvictions {
			refused[it.Node] = append(refused[it.Node], r.Pod+": "+r.Reason)
		}
		if it.EstimateSource != "node" || it.Start == nil || it.End == nil || it.End.Sub(*it.Start) != 10*time.Minute {
			t.Errorf("%s: start %v end %v from %q, want 10 minutes from its own history", it.Node, it.Start, it.End, it.EstimateSource)
		}
	}
	if !slices.Equal(order, nodes) {
		t.Errorf("order %v, want %v (by name: nobody waits yet)", order, nodes)
	}
	for name := range stuck {
		if !slices.ContainsFunc(refused[nodes[0]], func(s string) bool { return strings.HasPrefix(s, e.Namespace+"/"+name+": ") }) {
			t.Errorf("%s's refused evictions %q do not name %s (its budget allows no disruption)", nodes[0], refused[nodes[0]], name)
		}
	}
	for name := range twice {
		if len(refused[nodes[1]]) != 1 || !strings.HasPrefix(refused[nodes[1]][0], e.Namespace+"/"+name+": ") || !strings.Contains(refused[nodes[1]][0], "more than one") {
			t.Errorf("%s's refused evictions %q, want %s, which two budgets cover", nodes[1], refused[nodes[1]], name)
		}
	}
	if len(refused[nodes[2]]) > 0 {
		t.Errorf("%s's refused evictions %q, want none (its budget allows one)", nodes[2], refused[nodes[2]])
	}
	// The test's own arithmetic: the third node ends 30 minutes after the
	// plan's start.
	if len(p.Windows) != 1 {
		t.Fatalf("windows %+v, want tonight's", p.Windows)
	}
	w := p.Windows[0]
	// plus the two handoffs before it, which the plan adds as the history
	// measured them (a loaded machine's are about half a second each).
	handoff := time.Duration(p.HandoffSeconds * float64(time.Second))
	over := p.Start.Add(30*time.Minute + 2*handoff).Sub(closes)
	if w.Fits || w.FirstLate != nodes[2] || w.Late != 1 || !w.Closes.Equal(closes) || (time.Duration(w.OverSeconds)*time.Second-over).Abs() > time.Second {
		t.Errorf("window %+v, want %s late by %s, closing %s", w, nodes[2], over, closes)
	}
	if !strings.Contains(p.Summary, "does NOT fit") {
		t.Errorf("summary %q does not say it does not fit", p.Summary)
	}
	table := mustCtl(t, e, "plan", "--policy", "tonight")
	for _, want := range []string{"eviction of " + e.Namespace + "/", "does NOT fit", nodes[2] + " is the first that will not"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, table)
		}
	}

	// Nothing changed: no node cordoned, every pod where it was, every
	// budget as it was.
	for _, n := range nodes {
		node, err := e.Client.CoreV1().Nodes().Get(e.Ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if node.Spec.Unschedulable {
			t.Errorf("plan cordoned %s", n)
		}
	}
	for _, uids := range []map[string]string{stuck, twice, free} {
		for name, uid := range uids {
			pod, err := e.Client.CoreV1().Pods(e.Namespace).Get(e.Ctx, name, metav1.GetOptions{})
			if err != nil || string(pod.UID) != uid || pod.DeletionTimestamp != nil {
				t.Errorf("pod %s after plan: %v (uid %s, want %s)", name, err, podUID(pod), uid)
			}
		}
	}
	b, err := e.Client.PolicyV1().PodDisruptionBudgets(e.Namespace).Get(e.Ctx, "free", metav1.GetOptions{})
	if err != nil || b.Status.DisruptionsAllowed != 1 || len(b.Status.DisruptedPods) > 0 {
		t.Errorf("budget free after plan: %v, %+v: a dry run spent it", err, b.Status)
	}
}

func podUID(p *corev1.Pod) string {
	if p == nil {
		return ""
	}
	return string(p.UID)
}
