package integration

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// A patch campaign's set (status.patch) is claimed by one node for the
// spec now, filled once by that node, and otherwise left as it is: the
// rules, case by case, as node A's credentials meet them on the API
// server (server-side dry runs from a status an admin wrote).
func TestAPatchSetIsClaimedAndFilledOnlyAsTheRulesSay(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(2)
	a, b := nodes[0], nodes[1]
	nodecreds.Install(e, e.Namespace)
	admin := dynamicClient(t, e)
	// A patch campaign, made from a script rollout (admission does not
	// look at signatures; the hosts do).
	out, err := nodecreds.CtlFor(e).Run(e.Ctx, "rollout", "create", "claims", "--script", writeScript(t, "true\n"), "--dry-run=client", "-o", "json")
	if err != nil {
		t.Fatalf("rollout create --dry-run: %v\n%s", err, out)
	}
	var doc unstructured.Unstructured
	if err := json.Unmarshal([]byte(out), &doc.Object); err != nil {
		t.Fatal(err)
	}
	unstructured.RemoveNestedField(doc.Object, "spec", "script")
	if err := unstructured.SetNestedField(doc.Object, map[string]any{"updates": "all"}, "spec", "patch"); err != nil {
		t.Fatal(err)
	}
	const sig, older = "signature-2", "signature-1"
	if err := unstructured.SetNestedField(doc.Object, sig, "spec", "signature"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Resource(rollout.GVR).Namespace(e.Namespace).Create(e.Ctx, &doc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	res := admin.Resource(rollout.GVR).Namespace(e.Namespace)
	// Promoted once: generation 2, the signature the same (a promotion is
	// no new spec to resolve).
	if _, err := res.Patch(e.Ctx, "claims", types.MergePatchType, []byte(`{"spec":{"promoted":1}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if u := getU(t, e, admin, rollout.GVR, e.Namespace, "claims"); u.GetGeneration() != 2 {
		t.Fatalf("the rollout's generation is %d after its promotion, want 2", u.GetGeneration())
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", nodecreds.Kubeconfig(e, a))
	if err != nil {
		t.Fatal(err)
	}
	asA := dynamic.NewForConfigOrDie(cfg).Resource(rollout.GVR).Namespace(e.Namespace)

	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC).Format(time.RFC3339)
	set := []any{map[string]any{"name": "kpt-app", "from": "1.0", "to": "2.0"}}
	claim := func(node, sig string) map[string]any {
		return map[string]any{"revision": "r2", "signature": sig, "resolvedOn": node}
	}
	with := func(m map[string]any, kv ...any) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	resolved := func(node, sig string) map[string]any {
		return with(claim(node, sig), "resolvedAt", at, "packages", set)
	}
	entry := func(node, state string) any {
		return map[string]any{"name": node, "revision": "r2", "stage": int64(0), "state": state}
	}
	// status writes the status an admin sets before a case: the entries,
	// and the set (nil: none).
	status := func(patch map[string]any, entries ...any) *unstructured.Unstructured {
		t.Helper()
		cur := getU(t, e, admin, rollout.GVR, e.Namespace, "claims")
		st := map[string]any{"nodes": append([]any{}, entries...)}
		if patch != nil {
			st["patch"] = patch
		}
		cur.Object["status"] = st
		w, err := res.UpdateStatus(e.Ctx, cur, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("the admin writing the status: %v", err)
		}
		return w
	}
	// try is node A's write of the set (nil: removed), with its own entry
	// in state mine ("": as it was), as a dry run.
	try := func(ctx context.Context, from *unstructured.Unstructured, patch map[string]any, mine string) error {
		u := from.DeepCopy()
		st, _ := u.Object["status"].(map[string]any)
		if patch == nil {
			delete(st, "patch")
		} else {
			st["patch"] = patch
		}
		if mine != "" {
			nodes, _ := st["nodes"].([]any)
			nodes = slices.DeleteFunc(nodes, func(e any) bool { return e.(map[string]any)["name"] == a })
			st["nodes"] = append(nodes, entry(a, mine))
		}
		_, err := asA.UpdateStatus(ctx, u, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	const refusal = "may claim status.patch"
	const W, R, S = rollout.Waiting, rollout.Running, rollout.Succeeded
	live := status(claim(b, sig), entry(b, rollout.Running))
	inForce(e, "rollouts", refusal, func(ctx context.Context) error { return try(ctx, live, claim(a, sig), rollout.Waiting) })

	for _, c := range []struct {
		what    string
		before  map[string]any
		entries []any
		write   map[string]any
		mine    string // A's entry in the write
		allowed bool
	}{
		{"A claims a campaign nobody claimed, queueing", nil, nil, claim(a, sig), W, true},
		{"A claims it without queueing", nil, nil, claim(a, sig), "", false},
		{"A claims it, its entry Running", nil, nil, claim(a, sig), R, false},
		{"A claims it as B", nil, nil, claim(b, sig), W, false},
		{"A claims it for a spec signed before", nil, nil, claim(a, older), W, false},
		{"A claims it resolved at once, unproven", nil, nil, with(claim(a, sig), "resolvedAt", at), W, false},
		{"A claims it with a set", nil, nil, with(claim(a, sig), "packages", set), W, false},
		{"A claims over B's set of a spec signed before", resolved(b, older), []any{entry(b, S)}, claim(a, sig), W, true},
		{"A claims over B's live claim", claim(b, sig), []any{entry(b, W)}, claim(a, sig), W, false},
		{"A claims over the claim of B, which withdrew", claim(b, sig), []any{entry(b, rollout.Cancelled)}, claim(a, sig), W, true},
		{"A claims over the claim of B, which failed", claim(b, sig), []any{entry(b, rollout.RolledBack)}, claim(a, sig), W, true},
		{"A claims over the claim of B, which has no entry", claim(b, sig), nil, claim(a, sig), W, true},
		{"A claims over B's proven set, the rollout promoted since", resolved(b, sig), []any{entry(b, rollout.Failed)}, claim(a, sig), W, false},
		{"A fills its own claim, succeeding", claim(a, sig), []any{entry(a, R)}, resolved(a, sig), S, true},
		{"A fills its own claim, still running", claim(a, sig), []any{entry(a, R)}, resolved(a, sig), R, false},
		{"A fills its own claim with an empty set", claim(a, sig), []any{entry(a, R)}, with(claim(a, sig), "resolvedAt", at), S, true},
		{"A fills its own claim as of another revision", claim(a, sig), []any{entry(a, R)}, with(resolved(a, sig), "revision", "r3"), S, false},
		{"A fills B's claim", claim(b, sig), []any{entry(b, R)}, resolved(b, sig), S, false},
		{"A fills its own claim twice", resolved(a, sig), []any{entry(a, S)},
			with(resolved(a, sig), "packages", []any{map[string]any{"name": "kpt-app", "from": "1.0", "to": "3.0"}}), S, false},
		{"A removes B's set", resolved(b, sig), []any{entry(b, S)}, nil, "", false},
		{"A removes its own claim", claim(a, sig), []any{entry(a, W)}, nil, "", false},
		{"A leaves B's set as it is", resolved(b, sig), []any{entry(b, S)}, resolved(b, sig), W, true},
	} {
		from := status(c.before, c.entries...)
		err := try(e.Ctx, from, c.write, c.mine)
		switch {
		case c.allowed && err != nil:
			t.Errorf("%s: %v, want it allowed", c.what, err)
		case !c.allowed && err == nil:
			t.Errorf("%s: allowed, want it refused", c.what)
		case !c.allowed && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), refusal)):
			t.Errorf("%s: %v, want it refused with %q", c.what, err, refusal)
		}
	}
}
