package rollout

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func change(name, from, to string) PackageChange {
	return PackageChange{Name: name, From: from, To: to}
}

// A node's entry lists only where it differs from the set, and the
// changes it made come back whole from it.
func TestANodesChangesComeBackFromItsEntryAndTheSet(t *testing.T) {
	set := []PackageChange{change("kpt-app", "1", "2"), change("kpt-lib", "1", "2"), change("kpt-new", "", "1")}
	for _, c := range []struct {
		what    string
		changes []PackageChange
		differ  int
		skipped []string
	}{
		{"exactly the set", set, 0, nil},
		{"from an older version", []PackageChange{change("kpt-app", "0.9", "2"), change("kpt-lib", "1", "2"), change("kpt-new", "", "1")}, 1, nil},
		{"without a package it does not have", []PackageChange{change("kpt-app", "1", "2")}, 0, []string{"kpt-lib", "kpt-new"}},
		{"nothing", nil, 0, []string{"kpt-app", "kpt-lib", "kpt-new"}},
	} {
		np := NodePatchOf(set, c.changes, true)
		if len(np.Packages) != c.differ || !reflect.DeepEqual(np.Skipped, c.skipped) || *np.Changed != len(c.changes) || !np.Rebooted {
			t.Errorf("%s: entry %+v, want %d differing and skipped %v", c.what, np, c.differ, c.skipped)
		}
		got, complete := ChangesOf(set, np)
		if !complete || len(got) != len(c.changes) {
			t.Errorf("%s: %v (complete %v), want %v", c.what, got, complete, c.changes)
			continue
		}
		for i := range got {
			if got[i] != c.changes[i] {
				t.Errorf("%s: change %d is %v, want %v", c.what, i, got[i], c.changes[i])
			}
		}
	}
}

// An entry is bounded: past MaxNodePackages it says the lists were cut,
// and the changes read back from it are not taken for complete.
func TestANodesEntryIsBounded(t *testing.T) {
	var set, changes []PackageChange
	for i := range MaxNodePackages + 10 {
		name := fmt.Sprintf("p%03d", i)
		set = append(set, change(name, "1", "2"))
		changes = append(changes, change(name, "0", "2"))
	}
	np := NodePatchOf(set, changes, false)
	if len(np.Packages) != MaxNodePackages || !np.Cut || *np.Changed != len(changes) {
		t.Fatalf("entry lists %d differing (cut: %v, changed %d), want %d and cut", len(np.Packages), np.Cut, *np.Changed, MaxNodePackages)
	}
	if _, complete := ChangesOf(set, np); complete {
		t.Error("a cut entry's changes were taken for complete")
	}
}

// A status written again keeps the set and the other nodes' entries as
// they are stored, not encoded anew: the admission policy compares them
// as written.
func TestAStatusWrittenAgainKeepsWhatOthersWroteAsWritten(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": Group + "/" + Version, "kind": Kind,
		"metadata": map[string]any{"name": "r", "generation": int64(2)},
		"spec":     map[string]any{"signature": "x"},
		"status": map[string]any{
			"patch": map[string]any{"revision": "", "observedGeneration": int64(2), "resolvedOn": "b",
				"resolvedAt": "2026-11-29T10:00:00.5+02:00", "packages": []any{}},
			"nodes": []any{map[string]any{"name": "b", "revision": "r1", "state": Running, "message": "", "packagesChanged": int64(0), "packages": []any{}}},
		},
	}}
	r, err := FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	st, err := WithEntry(r, NodeStatus{Name: "a", Revision: "r1", State: Waiting}, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	out, err := StatusObject(u, st)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range [][]string{{"status", "patch"}, {"status", "nodes"}} {
		want, _, _ := unstructured.NestedFieldNoCopy(u.Object, f...)
		got, _, _ := unstructured.NestedFieldNoCopy(out.Object, f...)
		if f[1] == "nodes" {
			got = got.([]any)[:1]
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%v: written again as %v, stored as %v", f, got, want)
		}
	}
}
