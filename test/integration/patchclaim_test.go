package integration

import (
	"context"
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
	out, err := nodecreds.CtlFor(e).Run(e.Ctx, "rollout", "create", "claims", "--script", writeScript(t, "true\n"), "--dry-run=client", "-o", "json")
	if err != nil {
		t.Fatalf("rollout create --dry-run: %v\n%s", err, out)
	}
	applyJSON(t, e, admin, out)
	res := admin.Resource(rollout.GVR).Namespace(e.Namespace)
	// A spec changed once: generation 2, so that a set of generation 1
	// is one of an older spec.
	if _, err := res.Patch(e.Ctx, "claims", types.MergePatchType, []byte(`{"spec":{"paused":true}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	u := getU(t, e, admin, rollout.GVR, e.Namespace, "claims")
	gen := u.GetGeneration()
	if gen != 2 {
		t.Fatalf("the rollout's generation is %d after one change of its spec, want 2", gen)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", nodecreds.Kubeconfig(e, a))
	if err != nil {
		t.Fatal(err)
	}
	asA := dynamic.NewForConfigOrDie(cfg).Resource(rollout.GVR).Namespace(e.Namespace)

	at := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC).Format(time.RFC3339)
	set := []any{map[string]any{"name": "kpt-app", "from": "1.0", "to": "2.0"}}
	claim := func(node string, g int64) map[string]any {
		return map[string]any{"revision": "r2", "observedGeneration": g, "resolvedOn": node}
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
	resolved := func(node string, g int64) map[string]any {
		return with(claim(node, g), "resolvedAt", at, "packages", set)
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
	// try is node A's write of the set (nil: removed), as a dry run.
	try := func(ctx context.Context, from *unstructured.Unstructured, patch map[string]any) error {
		u := from.DeepCopy()
		st, _ := u.Object["status"].(map[string]any)
		if patch == nil {
			delete(st, "patch")
		} else {
			st["patch"] = patch
		}
		_, err := asA.UpdateStatus(ctx, u, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	const refusal = "may claim status.patch"
	live := status(claim(b, gen), entry(b, rollout.Running))
	inForce(e, "rollouts", refusal, func(ctx context.Context) error { return try(ctx, live, claim(a, gen)) })

	for _, c := range []struct {
		what    string
		before  map[string]any
		entries []any
		write   map[string]any
		allowed bool
	}{
		{"A claims a campaign nobody claimed", nil, nil, claim(a, gen), true},
		{"A claims it as B", nil, nil, claim(b, gen), false},
		{"A claims it for an older spec", nil, nil, claim(a, gen-1), false},
		{"A claims it resolved at once, unproven", nil, nil, with(claim(a, gen), "resolvedAt", at), false},
		{"A claims it with a set", nil, nil, with(claim(a, gen), "packages", set), false},
		{"A claims over B's set of an older spec", resolved(b, gen-1), []any{entry(b, rollout.Succeeded)}, claim(a, gen), true},
		{"A claims over B's live claim", claim(b, gen), []any{entry(b, rollout.Waiting)}, claim(a, gen), false},
		{"A claims over the claim of B, which withdrew", claim(b, gen), []any{entry(b, rollout.Cancelled)}, claim(a, gen), true},
		{"A claims over the claim of B, which failed", claim(b, gen), []any{entry(b, rollout.RolledBack)}, claim(a, gen), true},
		{"A claims over the claim of B, which has no entry", claim(b, gen), nil, claim(a, gen), true},
		{"A claims over B's proven set", resolved(b, gen), []any{entry(b, rollout.Failed)}, claim(a, gen), false},
		{"A fills its own claim", claim(a, gen), []any{entry(a, rollout.Running)}, resolved(a, gen), true},
		{"A fills its own claim with an empty set", claim(a, gen), []any{entry(a, rollout.Running)}, with(claim(a, gen), "resolvedAt", at), true},
		{"A fills its own claim as of another revision", claim(a, gen), []any{entry(a, rollout.Running)}, with(resolved(a, gen), "revision", "r3"), false},
		{"A fills B's claim", claim(b, gen), []any{entry(b, rollout.Running)}, resolved(b, gen), false},
		{"A fills its own claim twice", resolved(a, gen), []any{entry(a, rollout.Succeeded)},
			with(resolved(a, gen), "packages", []any{map[string]any{"name": "kpt-app", "from": "1.0", "to": "3.0"}}), false},
		{"A removes B's set", resolved(b, gen), []any{entry(b, rollout.Succeeded)}, nil, false},
		{"A removes its own claim", claim(a, gen), []any{entry(a, rollout.Waiting)}, nil, false},
		{"A leaves B's set as it is", resolved(b, gen), []any{entry(b, rollout.Succeeded)}, resolved(b, gen), true},
	} {
		from := status(c.before, c.entries...)
		err := try(e.Ctx, from, c.write)
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
