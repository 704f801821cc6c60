package rights

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

const doc = `{"components":{"schemas":{
 "k.Thing":{"type":"object","x-kubernetes-group-version-kind":[{"group":"","version":"v1","kind":"Thing"}],
  "properties":{"apiVersion":{"type":"string"},"kind":{"type":"string"},
   "metadata":{"allOf":[{"$ref":"#/components/schemas/k.Meta"}]},
   "spec":{"type":"object","properties":{
     "on":{"type":"boolean"},"count":{"type":"integer"},"mode":{"type":"string","enum":["A","B"]},
     "tags":{"type":"array","items":{"type":"string"}},
     "containers":{"type":"array","x-kubernetes-list-map-keys":["name"],"items":{"type":"object","required":["name"],"properties":{"name":{"type":"string"},"image":{"type":"string"}}}},
     "extra":{"type":"object","required":["size"],"properties":{"size":{"type":"integer"},"note":{"type":"string"}}}}},
   "status":{"type":"object","properties":{
     "conditions":{"type":"array","x-kubernetes-patch-merge-key":"type","items":{"$ref":"#/components/schemas/k.Cond"}}}}}},
 "k.Meta":{"type":"object","properties":{"labels":{"type":"object","additionalProperties":{"type":"string"}},"name":{"type":"string"}}},
 "k.Cond":{"type":"object","required":["type","status"],"properties":{"type":{"type":"string"},"status":{"type":"string"},"message":{"type":"string"}}}
}}}`

// Every field of the schema gets a probe, a map's keys and a keyed list's
// items each their own, and each probe's change is seen by its Took.
func TestProbesCoverEveryField(t *testing.T) {
	s, err := Load([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	root, err := s.ForKind("", "v1", "Thing")
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	_ = json.Unmarshal([]byte(`{"metadata":{"name":"x","labels":{"a":"1"}},"spec":{"on":true,"mode":"A","tags":["t"],"containers":[{"name":"c","image":"i"}]},
	 "status":{"conditions":[{"type":"Ready","status":"True"}]}}`), &obj)
	probes := s.Probes(root, obj, Options{Now: time.Unix(1e9, 0), Keys: map[string][]string{
		"metadata.labels": {"kustodian.io/state"}, "status.conditions": {"type=Drained"}}})
	var paths []string
	for _, p := range probes {
		paths = append(paths, p.Path)
		c := deepCopy(obj)
		if p.Took(c) {
			t.Errorf("%s: the unchanged object counts as changed", p.Path)
		}
		p.Apply(c)
		if !p.Took(c) {
			t.Errorf("%s: its own change does not count", p.Path)
		}
	}
	want := []string{"metadata.labels[*]", "metadata.labels[a]", "metadata.labels[a]", "metadata.labels[kustodian.io/state]", "metadata.name",
		"spec.containers[name=c]", "spec.containers[name=" + ProbeKey + "]", "spec.count", "spec.extra", "spec.mode", "spec.on", "spec.tags[+]", "spec.tags[-]",
		"status.conditions[type=Drained]", "status.conditions[type=Ready]", "status.conditions[type=" + ProbeKey + "]"}
	if !slices.Equal(paths, want) {
		t.Errorf("paths\n%q\nwant\n%q", paths, want)
	}
}

func TestMatches(t *testing.T) {
	for _, tc := range []struct {
		entry, path string
		want        bool
	}{
		{"spec.unschedulable", "spec.unschedulable", true},
		{"spec.unschedulable", "spec.unschedulableX", false},
		{"metadata.annotations[*]", "metadata.annotations[x]", true},
		{"metadata.annotations[*]", "metadata.labels[x]", false},
		{"status.stages", "status.stages[+]", true},
		{"metadata.labels[a]", "metadata.labels[ab]", false},
	} {
		if got := Matches(tc.entry, tc.path); got != tc.want {
			t.Errorf("Matches(%q, %q) = %v", tc.entry, tc.path, got)
		}
	}
}

func deepCopy(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}
