package agent

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/kustodian/kustodian/internal/nodemarks"
	"github.com/kustodian/kustodian/internal/policy"
	"github.com/kustodian/kustodian/test/simapi"
)

// A policy's quarantine cap counts only the nodes of the policy that are
// quarantined: cordoned, marked with its name, and selected by it. Any
// node can mark itself, under any name: a node of another policy, or one
// not cordoned, takes no place.
func TestQuarantineCountsOnlyThePolicysCordonedNodes(t *testing.T) {
	node := func(name, role, mark string, cordoned bool) runtime.Object {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}, Annotations: map[string]string{}},
			Spec: corev1.NodeSpec{Unschedulable: cordoned}}
		if role != "" {
			n.Labels["role"] = role
		}
		if mark != "" {
			n.Annotations[nodemarks.AnnotationQuarantined] = mark
		}
		return n
	}
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for _, p := range []struct{ name, role string }{{"gpu", "gpu"}, {"web", "web"}} {
		spec := map[string]any{"nodeSelector": map[string]any{"matchLabels": map[string]any{"role": p.role}},
			"drain": map[string]any{"quarantine": map[string]any{"maxNodes": int64(2)}}}
		if err := store.Add(simapi.Unstructured(policy.Group+"/"+policy.Version, policy.Kind, "kustodian", p.name, spec)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		nodes []runtime.Object
		full  string // "" when not full; else the nodes it names
	}{
		{"two of the policy's nodes fill it", []runtime.Object{
			node("g1", "gpu", "gpu", true), node("g2", "gpu", "gpu", true)}, "g1, g2"},
		{"a node of another policy marked with its name does not count", []runtime.Object{
			node("g1", "gpu", "gpu", true), node("w1", "web", "gpu", true)}, ""},
		{"nor a node no policy selects", []runtime.Object{
			node("g1", "gpu", "gpu", true), node("x1", "", "gpu", true)}, ""},
		{"nor a marked node that is not cordoned", []runtime.Object{
			node("g1", "gpu", "gpu", true), node("g2", "gpu", "gpu", false)}, ""},
		{"nor this node", []runtime.Object{
			node("g1", "gpu", "gpu", true), node("g0", "gpu", "gpu", true)}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := &Agent{node: "g0", kube: fake.NewClientset(c.nodes...), caches: informed{policies: store}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			p := a.resolvePolicy(a.policies(), map[string]string{"role": "gpu"})
			if p.Name != "gpu" || p.Err != nil {
				t.Fatalf("this node's policy: %+v", p)
			}
			full, err := a.quarantineFull(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case c.full == "" && full != "":
				t.Fatalf("full: %s", full)
			case c.full != "" && !strings.Contains(full, "2 of 2 nodes of policy gpu quarantined already ("+c.full+")"):
				t.Fatalf("full says %q, want it to name %s", full, c.full)
			}
		})
	}
}
