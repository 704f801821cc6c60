package rollout

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

// A node's entry is written by a JSON patch of that entry alone: replaced
// where it stands after a test of its name, or added at the end; never a
// patch when the status has no list of entries yet. The patch is applied
// here as the API server applies it, and what it leaves is checked.
func TestEntryPatch(t *testing.T) {
	obj := func(nodes ...string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": Group + "/" + Version, "kind": Kind,
			"metadata": map[string]any{"name": "r"}}}
		if nodes != nil {
			list := []any{}
			for _, n := range nodes {
				list = append(list, map[string]any{"name": n, "revision": "old", "state": Waiting, "stage": int64(0)})
			}
			u.Object["status"] = map[string]any{"nodes": list}
		}
		return u
	}
	apply := func(t *testing.T, u *unstructured.Unstructured, patch []byte) (map[string]any, error) {
		t.Helper()
		doc, err := json.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			t.Fatalf("the patch does not decode: %v: %s", err, patch)
		}
		out, err := p.Apply(doc)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		return m, json.Unmarshal(out, &m)
	}
	entries := func(m map[string]any) []string {
		var out []string
		for _, e := range m["status"].(map[string]any)["nodes"].([]any) {
			e := e.(map[string]any)
			out = append(out, e["name"].(string)+"="+e["state"].(string))
		}
		return out
	}
	e := NodeStatus{Name: "b", Revision: "new", State: Refused, Message: "not signed"}

	if _, ok, err := EntryPatch(obj(), e); ok || err != nil {
		t.Errorf("no list of entries: ok %v, err %v; want no patch", ok, err)
	}
	patch, ok, err := EntryPatch(obj("a", "b", "c"), e)
	if !ok || err != nil {
		t.Fatalf("ok %v, err %v", ok, err)
	}
	m, err := apply(t, obj("a", "b", "c"), patch)
	if err != nil {
		t.Fatal(err)
	}
	if got := entries(m); len(got) != 3 || got[0] != "a=Waiting" || got[1] != "b=Refused" || got[2] != "c=Waiting" {
		t.Errorf("replacing b's entry left %v", got)
	}
	// Another node's entry where b's stood (the list changed since the
	// patch was made): the test fails, nothing is written.
	if _, err := apply(t, obj("a", "x", "c"), patch); err == nil {
		t.Error("a patch made for b's entry at place 2 applied to x's entry there")
	}
	patch, ok, err = EntryPatch(obj("a", "c"), e)
	if !ok || err != nil {
		t.Fatalf("ok %v, err %v", ok, err)
	}
	// Applied to a list that grew meanwhile: added at the end, the others kept.
	m, err = apply(t, obj("a", "c", "d"), patch)
	if err != nil {
		t.Fatal(err)
	}
	if got := entries(m); len(got) != 4 || got[3] != "b=Refused" || got[2] != "d=Waiting" {
		t.Errorf("adding b's entry left %v", got)
	}
	if m["status"].(map[string]any)["nodes"].([]any)[3].(map[string]any)["message"] != "not signed" {
		t.Errorf("the entry added is not the whole entry: %v", m["status"])
	}
}
