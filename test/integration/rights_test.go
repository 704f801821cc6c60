package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	authv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
	"github.com/kustodian/kustodian/test/rights"
)

// rightsFile is the table of every write a node may make.
const rightsFile = "../../docs/security-rights.yaml"

func readRights(t *testing.T) rights.Table {
	t.Helper()
	b, err := os.ReadFile(rightsFile)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := rights.ReadTable(b)
	if err != nil {
		t.Fatalf("%s: %v", rightsFile, err)
	}
	return rt
}

// writeVerbs are the verbs that change something.
var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection", "escalate", "bind", "impersonate", "approve", "sign", "*"}

// grantedWrites asks the API server what the client may write in each
// namespace (cluster-wide rules come back in every one): "resource verb".
func grantedWrites(t *testing.T, ctx context.Context, c kubernetes.Interface, namespaces ...string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, ns := range namespaces {
		r, err := c.AuthorizationV1().SelfSubjectRulesReviews().Create(ctx, &authv1.SelfSubjectRulesReview{Spec: authv1.SelfSubjectRulesReviewSpec{Namespace: ns}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("SelfSubjectRulesReview in %s: %v", ns, err)
		}
		if r.Status.Incomplete {
			t.Fatalf("SelfSubjectRulesReview in %s is incomplete: %s", ns, r.Status.EvaluationError)
		}
		for _, rule := range r.Status.ResourceRules {
			for _, v := range rule.Verbs {
				if !slices.Contains(writeVerbs, v) {
					continue
				}
				for _, res := range rule.Resources {
					out[res+" "+v] = true
				}
			}
		}
	}
	return out
}

// target is one object a row tries: how to reach it and what it is.
type target struct {
	gvr       schema.GroupVersionResource
	gvk       schema.GroupVersionKind
	obj       *unstructured.Unstructured // live (update, patch) or to create
	values    map[string]any             // rights.Options.Values
	keys      map[string][]string        // rights.Options.Keys
	listKeys  map[string]string
	wholeCall func(ctx context.Context) error // delete, eviction, create judged whole
	// later makes obj when it is first needed: A's record, once the
	// creates (which need it absent) are done.
	later func() *unstructured.Unstructured
}

// Every write a node's credentials may make is a row of
// docs/security-rights.yaml, and nothing else: the rights the API server
// gives node A's token are exactly the rows' (resource, verb), and for
// every row, a change of every field path of its object (from the API
// server's OpenAPI schema, by server-side dry run) is accepted exactly
// where the row says. A field or subresource Kubernetes adds later is
// tried, or fails the test by name.
func TestEveryWriteANodeCanMake(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	a, b := nodes[0], nodes[1]
	e.KuredDaemonSet(e.Namespace, "")
	nodecreds.Install(e, e.Namespace)
	table := readRights(t)
	rc, err := clientcmd.BuildConfigFromFlags("", nodecreds.Kubeconfig(e, a))
	if err != nil {
		t.Fatal(err)
	}
	asA := kubernetes.NewForConfigOrDie(rc)
	dynA := dynamic.NewForConfigOrDie(rc)
	dyn := dynamicClient(t, e)

	// 1. The rights, as the API server has them.
	granted := grantedWrites(t, e.Ctx, asA, e.Namespace, metav1.NamespaceDefault, "kube-system", "kustodian-rights-elsewhere")
	listed := map[string]bool{}
	for _, r := range table.Rights {
		listed[r.Resource+" "+r.Verb] = true
	}
	for k := range granted {
		if !listed[k] {
			t.Errorf("node %s may %s (RBAC), and no row of %s says so: add rows for it (own and others' objects) and the objects to try below", a, k, rightsFile)
		}
	}
	for k := range listed {
		if !granted[k] {
			t.Errorf("%s lists %q, which node %s may not do (RBAC): remove the row", rightsFile, k, a)
		}
	}

	// 2. The objects each row names.
	targets := rightsTargets(t, e, dyn, a, b)
	schemas := openAPISchemas(t, e)
	dry := []string{metav1.DryRunAll}
	// install proves every policy in force but two, which would need a
	// pod on another Node and a rollout: wait until each refuses a dry run.
	podB := targets["pod on another Node"].obj
	inForce(e, "pods", "may delete only pods on its own Node", func(ctx context.Context) error {
		uid := podB.GetUID()
		return dynA.Resource(targets["pod on another Node"].gvr).Namespace(podB.GetNamespace()).Delete(ctx, podB.GetName(),
			metav1.DeleteOptions{DryRun: dry, Preconditions: &metav1.Preconditions{UID: &uid}})
	})
	ro := targets["a MaintenanceRollout"].obj
	inForce(e, "rollouts", "may change only its own entry", func(ctx context.Context) error {
		u := ro.DeepCopy()
		if err := unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": "kustodian-probe", "revision": "x", "state": rollout.Succeeded}}, "status", "nodes"); err != nil {
			return err
		}
		_, err := dynA.Resource(rollout.GVR).Namespace(u.GetNamespace()).UpdateStatus(ctx, u, metav1.UpdateOptions{DryRun: dry})
		return err
	})
	tried, accepted := 0, 0
	rows := slices.Clone(table.Rights)
	slices.SortStableFunc(rows, func(x, y rights.Row) int { return boolOrder(x.Verb != "create") - boolOrder(y.Verb != "create") })
	for _, row := range rows {
		if row.Verb == "create" && strings.HasPrefix(row.Resource, "pods/") {
			row.Verb = "evict"
		}
		name := row.Resource + " " + row.Verb + " (" + row.Object + ")"
		tg, ok := targets[row.Object]
		if !ok {
			t.Errorf("%s: the test has no object %q to try; add it to rightsTargets", name, row.Object)
			continue
		}
		if tg.obj == nil && tg.later != nil {
			tg.obj = tg.later()
			targets[row.Object] = tg
		}
		var sub []string
		if _, s, ok := strings.Cut(row.Resource, "/"); ok && s != "eviction" {
			sub = []string{s}
		}
		if tg.wholeCall != nil || row.Verb == "delete" {
			call := tg.wholeCall
			if row.Verb == "delete" {
				call = func(ctx context.Context) error {
					uid := tg.obj.GetUID()
					return dynA.Resource(tg.gvr).Namespace(tg.obj.GetNamespace()).Delete(ctx, tg.obj.GetName(),
						metav1.DeleteOptions{DryRun: dry, Preconditions: &metav1.Preconditions{UID: &uid}})
				}
			}
			err := call(e.Ctx)
			allowed := slices.Contains(row.Changes, rights.Whole)
			tried++
			switch {
			case err == nil && !allowed:
				t.Errorf("%s: allowed; the table says refused", name)
			case err == nil:
				accepted++
			case allowed:
				t.Errorf("%s: %v; the table says allowed", name, err)
			case !apierrors.IsForbidden(err):
				t.Errorf("%s: %v, want forbidden", name, err)
			}
			continue
		}
		root, err := schemas.ForKind(tg.gvk.Group, tg.gvk.Version, tg.gvk.Kind)
		if err != nil {
			t.Fatal(err)
		}
		keys := map[string][]string{}
		for k, v := range tg.keys {
			keys[k] = v
		}
		for _, c := range row.Changes {
			if base, key, ok := strings.Cut(c, "["); ok && !strings.HasSuffix(c, "[*]") {
				keys[base] = append(keys[base], strings.TrimSuffix(key, "]"))
			}
		}
		probes := schemas.Probes(root, tg.obj.Object, rights.Options{Now: time.Now(), Keys: keys, ListKeys: tg.listKeys, Values: tg.values})
		var took, invalid []string
		for _, p := range probes {
			if table.NotTried(p.Path) {
				continue
			}
			tried++
			got, err := tryProbe(e.Ctx, dynA, dyn, row.Verb, sub, tg, p)
			switch {
			case err == nil && p.Took(got):
				took = append(took, p.Path)
			case err == nil, apierrors.IsForbidden(err):
				// Refused, or without effect (a field the server sets).
			case apierrors.IsInvalid(err), apierrors.IsBadRequest(err):
				invalid = append(invalid, p.Path)
			default:
				t.Errorf("%s: %s: %v", name, p.Path, err)
			}
		}
		accepted += len(took)
		slices.Sort(took)
		took = slices.Compact(took)
		for _, p := range took {
			if !slices.ContainsFunc(row.Changes, func(c string) bool { return rights.Matches(strings.ReplaceAll(c, "<self>", a), p) }) {
				t.Errorf("%s: node %s changed %s; the table does not allow it", name, a, p)
			}
		}
		for _, c := range row.Changes {
			c = strings.ReplaceAll(c, "<self>", a)
			if !slices.ContainsFunc(took, func(p string) bool { return rights.Matches(c, p) }) {
				t.Errorf("%s: the table allows %s, and node %s could not change it (invalid values tried: %q)", name, c, a, invalid)
			}
		}
		t.Logf("%s: %d field paths tried, %d changed: %s; refused as invalid values: %d", name, len(probes), len(took), strings.Join(took, ", "), len(invalid))
	}
	t.Logf("in all: %d writes tried, %d accepted", tried, accepted)
}

func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}

// tryProbe makes one change with node A's client, as a server-side dry run.
func tryProbe(ctx context.Context, c, admin dynamic.Interface, verb string, sub []string, tg target, p rights.Probe) (map[string]any, error) {
	changed := tg.obj.DeepCopy()
	p.Apply(changed.Object)
	r := c.Resource(tg.gvr).Namespace(tg.obj.GetNamespace())
	dry := []string{metav1.DryRunAll}
	var got *unstructured.Unstructured
	var err error
	switch verb {
	case "patch":
		// The patch is made from the object as it is now: a merge patch
		// sends whole lists, and the kubelet's conditions move on.
		fresh, gerr := admin.Resource(tg.gvr).Namespace(tg.obj.GetNamespace()).Get(ctx, tg.obj.GetName(), metav1.GetOptions{}, sub...)
		if gerr != nil {
			return nil, gerr
		}
		changed = fresh.DeepCopy()
		p.Apply(changed.Object)
		var before, after []byte
		if before, err = json.Marshal(fresh.Object); err == nil {
			if after, err = json.Marshal(changed.Object); err == nil {
				var patch []byte
				if patch, err = jsonpatch.CreateMergePatch(before, after); err == nil {
					got, err = r.Patch(ctx, tg.obj.GetName(), types.MergePatchType, patch, metav1.PatchOptions{DryRun: dry}, sub...)
				}
			}
		}
	case "update":
		// Controllers write the objects meanwhile (a DaemonSet's status):
		// a conflict is tried again on the object as it is now, never
		// taken for a refusal.
		for try := 0; ; try++ {
			got, err = r.Update(ctx, changed, metav1.UpdateOptions{DryRun: dry}, sub...)
			if !apierrors.IsConflict(err) || try == 5 {
				break
			}
			fresh, gerr := admin.Resource(tg.gvr).Namespace(tg.obj.GetNamespace()).Get(ctx, tg.obj.GetName(), metav1.GetOptions{})
			if gerr != nil {
				return nil, gerr
			}
			changed = fresh
			p.Apply(changed.Object)
		}
	case "create":
		got, err = r.Create(ctx, changed, metav1.CreateOptions{DryRun: dry}, sub...)
	default:
		return nil, fmt.Errorf("verb %s has no probe", verb)
	}
	if err != nil {
		return nil, err
	}
	return got.Object, nil
}

// openAPISchemas are the component schemas of every group the rows use.
func openAPISchemas(t *testing.T, e *cluster.Env) rights.Schemas {
	t.Helper()
	paths, err := e.Client.Discovery().OpenAPIV3().Paths()
	if err != nil {
		t.Fatal(err)
	}
	all := rights.Schemas{}
	for _, gv := range []string{"api/v1", "apis/coordination.k8s.io/v1", "apis/apps/v1", "apis/" + rollout.Group + "/" + rollout.Version} {
		p, ok := paths[gv]
		if !ok {
			t.Fatalf("the API server serves no OpenAPI v3 document for %s", gv)
		}
		doc, err := p.Schema("application/json")
		if err != nil {
			t.Fatal(err)
		}
		s, err := rights.Load(doc)
		if err != nil {
			t.Fatalf("%s: %v", gv, err)
		}
		for k, v := range s {
			all[k] = v
		}
	}
	return all
}
