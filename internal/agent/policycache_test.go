package agent

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/client-go/tools/cache"

	"github.com/kustodian/kustodian/internal/policy"
	"github.com/kustodian/kustodian/test/simapi"
)

// The policies are read (and an unreadable one reported) once per change,
// and this node's policy resolved once per change of the policies or of
// its labels.
func TestPoliciesAreReadOncePerChange(t *testing.T) {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	add := func(name, rv string, spec map[string]any) {
		u := simapi.Unstructured(policy.Group+"/"+policy.Version, policy.Kind, "kustodian", name, spec)
		u.SetResourceVersion(rv)
		if err := store.Update(u); err != nil {
			t.Fatal(err)
		}
	}
	add("zones", "1", map[string]any{"groupBy": "zone"})
	add("broken", "2", map[string]any{"concurrency": "many"})
	var logs bytes.Buffer
	a := &Agent{caches: informed{policies: store}, log: slog.New(slog.NewTextHandler(&logs, nil))}

	first := a.policies()
	if len(first) != 2 {
		t.Fatalf("%d policies read, want 2", len(first))
	}
	again := a.policies()
	if &again[0] != &first[0] || strings.Count(logs.String(), "cannot be read") != 1 {
		t.Errorf("the same policies were read again (warnings: %d)", strings.Count(logs.String(), "cannot be read"))
	}
	e := a.resolvePolicy(again, map[string]string{"zone": "a"})
	if e.Err == nil || !strings.Contains(e.Err.Error(), "broken") {
		t.Fatalf("an unreadable policy holds the node: %+v", e)
	}
	add("broken", "3", map[string]any{"concurrency": int64(2), "nodeSelector": map[string]any{"matchLabels": map[string]any{"role": "gpu"}}})
	changed := a.policies()
	if &changed[0] == &first[0] {
		t.Fatal("a changed policy was not read again")
	}
	if e := a.resolvePolicy(changed, map[string]string{"zone": "a"}); e.Err != nil || e.Name != "zones" || e.Group != "a" {
		t.Errorf("after the fix: %+v, want zones/a", e)
	}
	if e := a.resolvePolicy(changed, map[string]string{"zone": "b"}); e.Group != "b" {
		t.Errorf("after the node's labels changed: group %q, want b", e.Group)
	}
}
