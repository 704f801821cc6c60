// Package rights generates, from an API server's OpenAPI v3 schema, one
// change for every field path of a live object: the probes with which
// TestEveryWriteANodeCanMake tries what a node's credentials may change.
// The paths come from the schema, not from a list written by hand, so a
// field Kubernetes adds later is tried too.
//
// Paths are written as in docs/security-rights.yaml: dotted fields
// (spec.unschedulable), a map's key in brackets (metadata.labels[k]), a
// list's item by its key (status.conditions[type=Ready]); [+] appends an
// item to a list without a key, [-] removes its first.
package rights

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"
)

// Schemas are an OpenAPI v3 document's component schemas, by name.
type Schemas map[string]map[string]any

// Load reads the component schemas of an OpenAPI v3 document.
func Load(doc []byte) (Schemas, error) {
	var d struct {
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, err
	}
	if len(d.Components.Schemas) == 0 {
		return nil, fmt.Errorf("the document has no component schemas")
	}
	return d.Components.Schemas, nil
}

// ForKind is the schema of group/version kind.
func (s Schemas) ForKind(group, version, kind string) (map[string]any, error) {
	for name, sc := range s {
		gvks, _ := sc["x-kubernetes-group-version-kind"].([]any)
		for _, g := range gvks {
			m, _ := g.(map[string]any)
			if m["group"] == group && m["version"] == version && m["kind"] == kind {
				_ = name
				return sc, nil
			}
		}
	}
	return nil, fmt.Errorf("no schema of %s/%s %s", group, version, kind)
}

// resolve follows $ref, also inside allOf (how v3 refers with a
// description beside).
func (s Schemas) resolve(sc map[string]any) (map[string]any, string) {
	for i := 0; i < 20; i++ {
		ref, _ := sc["$ref"].(string)
		if ref == "" {
			if all, ok := sc["allOf"].([]any); ok && len(all) == 1 {
				if m, ok := all[0].(map[string]any); ok {
					if r, _ := m["$ref"].(string); r != "" {
						ref = r
					}
				}
			}
		}
		if ref == "" {
			return sc, ""
		}
		name := strings.TrimPrefix(ref, "#/components/schemas/")
		next, ok := s[name]
		if !ok {
			return sc, name
		}
		sc = next
		if _, more := sc["$ref"]; !more {
			if _, more := sc["allOf"]; !more {
				return sc, name
			}
		}
	}
	return sc, ""
}

// Probe is one change to one field path of an object.
type Probe struct {
	Path string
	// Apply makes the change on a copy of the object.
	Apply func(obj map[string]any)
	// Took reports whether an object the API server returned has the
	// change.
	Took func(obj map[string]any) bool
}

// Options say what besides the schema the probes try.
type Options struct {
	// Keys are, by path of a map or a keyed list, the keys to try besides
	// the object's own and a made-up one (the keys a table names).
	Keys map[string][]string
	// ListKeys names, by path of a list, the field that keys its items
	// where the schema names none (x-kubernetes-list-map-keys or
	// x-kubernetes-patch-merge-key).
	ListKeys map[string]string
	// Values are, by path, the value to set instead of a generated one
	// (an owner that exists, a holder that is a node).
	Values map[string]any
	// Now is the time put in date-time fields.
	Now time.Time
}

// ProbeKey is the made-up key tried in every map and keyed list.
const ProbeKey = "kustodian-probe.example.com/x"

// Probes are the changes of every field path of obj, an object of schema
// root.
func (s Schemas) Probes(root, obj map[string]any, o Options) []Probe {
	g := &gen{s: s, o: o}
	g.walk(root, nil, obj)
	sort.SliceStable(g.out, func(i, j int) bool { return g.out[i].Path < g.out[j].Path })
	return g.out
}

type gen struct {
	s   Schemas
	o   Options
	out []Probe
}

func dotted(path []string) string { return strings.Join(path, ".") }

func (g *gen) walk(sc map[string]any, path []string, val any) {
	sc, ref := g.s.resolve(sc)
	p := dotted(path)
	if v, ok := g.o.Values[p]; ok {
		g.scalar(path, v)
		return
	}
	switch {
	case ref == "io.k8s.apimachinery.pkg.apis.meta.v1.Time" || ref == "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime":
		g.scalar(path, g.timeValue(val, ref))
		return
	case ref == "io.k8s.apimachinery.pkg.api.resource.Quantity":
		g.scalar(path, "3")
		return
	case ref == "io.k8s.apimachinery.pkg.util.intstr.IntOrString":
		g.scalar(path, int64(3))
		return
	case ref == "io.k8s.apimachinery.pkg.runtime.RawExtension" || sc["x-kubernetes-preserve-unknown-fields"] == true && sc["properties"] == nil:
		g.scalar(path, map[string]any{"kustodian-probe": "x"})
		return
	}
	typ, _ := sc["type"].(string)
	props, _ := sc["properties"].(map[string]any)
	switch {
	case len(props) > 0 && val == nil && len(path) > 0:
		// An object the live one does not have: set it whole, with its
		// required fields (one field alone would be invalid).
		g.scalar(path, g.newObject(sc, nil, ""))
	case len(props) > 0:
		m, _ := val.(map[string]any)
		names := make([]string, 0, len(props))
		for k := range props {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			if len(path) == 0 && (k == "apiVersion" || k == "kind") {
				continue // the request's own type, not a field of the object
			}
			child, _ := props[k].(map[string]any)
			g.walk(child, append(slices.Clone(path), k), m[k])
		}
	case typ == "object" || sc["additionalProperties"] != nil:
		g.mapProbes(sc, path, val)
	case typ == "array":
		g.listProbes(sc, path, val)
	default:
		g.scalar(path, g.newScalar(sc, val))
	}
}

func (g *gen) timeValue(val any, ref string) any {
	t := g.o.Now.UTC().Truncate(time.Second)
	if old, ok := val.(string); ok && old == t.Format(time.RFC3339) {
		t = t.Add(time.Second)
	}
	if strings.HasSuffix(ref, "MicroTime") {
		return t.Format("2006-01-02T15:04:05.000000Z07:00")
	}
	return t.Format(time.RFC3339)
}

// newScalar is a value of sc's type that differs from val.
func (g *gen) newScalar(sc map[string]any, val any) any {
	if enum, ok := sc["enum"].([]any); ok {
		for _, e := range enum {
			if !reflect.DeepEqual(e, val) {
				return e
			}
		}
	}
	switch sc["type"] {
	case "boolean":
		b, _ := val.(bool)
		return !b
	case "integer", "number":
		switch n := val.(type) {
		case float64:
			return int64(n) + 1
		case int64:
			return n + 1
		}
		return int64(1)
	}
	if sc["format"] == "date-time" {
		return g.timeValue(val, "")
	}
	if s, ok := val.(string); ok && s == "kustodian-probe" {
		return "kustodian-probe-2"
	}
	return "kustodian-probe"
}

func (g *gen) scalar(path []string, v any) {
	path = slices.Clone(path)
	g.out = append(g.out, Probe{
		Path:  dotted(path),
		Apply: func(obj map[string]any) { set(obj, path, v) },
		Took:  func(obj map[string]any) bool { got, _ := get(obj, path); return same(got, v) },
	})
}

func (g *gen) mapProbes(sc map[string]any, path []string, val any) {
	p := dotted(path)
	m, _ := val.(map[string]any)
	keys := []string{ProbeKey}
	for k := range m {
		keys = append(keys, k)
	}
	keys = append(keys, g.o.Keys[p]...)
	slices.Sort(keys)
	keys = slices.Compact(keys)
	item, _ := sc["additionalProperties"].(map[string]any)
	if item == nil {
		item = map[string]any{"type": "string"}
	}
	for _, k := range keys {
		name := p + "[" + k + "]"
		if k == ProbeKey {
			name = p + "[*]"
		}
		old, had := m[k]
		v := g.itemValue(item, old, path)
		if ov, ok := g.o.Values[p+"["+k+"]"]; ok {
			v = ov
		}
		g.out = append(g.out, Probe{
			Path: name,
			Apply: func(obj map[string]any) {
				mm, _ := getMap(obj, path)
				mm[k] = v
			},
			Took: func(obj map[string]any) bool {
				got, _ := get(obj, path)
				gm, _ := got.(map[string]any)
				return same(gm[k], v)
			},
		})
		if had {
			g.out = append(g.out, Probe{
				Path: name,
				Apply: func(obj map[string]any) {
					mm, _ := getMap(obj, path)
					delete(mm, k)
				},
				Took: func(obj map[string]any) bool {
					got, _ := get(obj, path)
					gm, _ := got.(map[string]any)
					_, still := gm[k]
					return !still
				},
			})
		}
	}
}

// itemValue is a value for a map's or a list's item: a change of old, or a
// new one.
func (g *gen) itemValue(item map[string]any, old any, path []string) any {
	item, ref := g.s.resolve(item)
	switch {
	case ref == "io.k8s.apimachinery.pkg.api.resource.Quantity":
		if old == "3" {
			return "4"
		}
		return "3"
	case item["type"] == "string" || item["type"] == nil && item["properties"] == nil:
		if s, ok := old.(string); ok {
			return s + "-probe"
		}
		return "kustodian-probe"
	}
	return g.newObject(item, old, "")
}

// newObject is an object of schema sc: old with one plain field changed
// (not key, which names the item), or one with its required fields
// filled.
func (g *gen) newObject(sc map[string]any, old any, key string) any {
	sc, _ = g.s.resolve(sc)
	props, _ := sc["properties"].(map[string]any)
	if len(props) == 0 {
		return g.newScalar(sc, old)
	}
	out := map[string]any{}
	if m, ok := old.(map[string]any); ok {
		for k, v := range m {
			out[k] = v
		}
	}
	req, _ := sc["required"].([]any)
	for _, r := range req {
		k, _ := r.(string)
		if _, ok := out[k]; !ok {
			child, _ := props[k].(map[string]any)
			out[k] = g.fill(child, k)
		}
	}
	if old == nil {
		return out
	}
	// Change one plain field so that the item differs from old: a
	// condition's status, else a message, else the first string field.
	names := []string{"status", "message", "reason", "value", "image", "address"}
	var rest []string
	for k := range props {
		rest = append(rest, k)
	}
	sort.Strings(rest)
	for _, k := range append(names, rest...) {
		child, ok := props[k].(map[string]any)
		if !ok || k == key {
			continue
		}
		c, _ := g.s.resolve(child)
		if c["type"] != "string" || c["format"] == "date-time" {
			continue
		}
		switch {
		case k == "status" && out[k] == "True":
			out[k] = "False"
		case k == "status":
			out[k] = "True"
		default:
			out[k] = g.newScalar(c, out[k])
		}
		return out
	}
	return out
}

// fill is a value for a required field named name.
func (g *gen) fill(sc map[string]any, name string) any {
	sc, ref := g.s.resolve(sc)
	switch {
	case strings.HasSuffix(ref, "v1.Time") || strings.HasSuffix(ref, "MicroTime"):
		return g.timeValue(nil, ref)
	case name == "status":
		return "True"
	}
	if _, ok := sc["properties"]; ok {
		return g.newObject(sc, nil, "")
	}
	return g.newScalar(sc, nil)
}

func (g *gen) listProbes(sc map[string]any, path []string, val any) {
	p := dotted(path)
	list, _ := val.([]any)
	item, _ := sc["items"].(map[string]any)
	key := listKey(sc)
	if k, ok := g.o.ListKeys[p]; ok {
		key = k
	}
	if key != "" {
		keys := []string{ProbeKey}
		for _, it := range list {
			if m, ok := it.(map[string]any); ok {
				if s, ok := m[key].(string); ok {
					keys = append(keys, s)
				}
			}
		}
		for _, k := range g.o.Keys[p] {
			keys = append(keys, strings.TrimPrefix(k, key+"="))
		}
		slices.Sort(keys)
		keys = slices.Compact(keys)
		for _, k := range keys {
			k := k
			var old any
			idx := -1
			for i, it := range list {
				if m, ok := it.(map[string]any); ok && m[key] == k {
					old, idx = it, i
				}
			}
			v, _ := g.newObject(item, old, key).(map[string]any)
			if v == nil {
				continue
			}
			v[key] = k
			name := p + "[" + key + "=" + k + "]"
			g.out = append(g.out, Probe{
				Path: name,
				Apply: func(obj map[string]any) {
					l, _ := get(obj, path)
					ll, _ := l.([]any)
					ll = slices.Clone(ll)
					if idx >= 0 {
						ll[idx] = v
					} else {
						ll = append(ll, v)
					}
					set(obj, path, ll)
				},
				Took: func(obj map[string]any) bool {
					l, _ := get(obj, path)
					ll, _ := l.([]any)
					for _, it := range ll {
						if m, ok := it.(map[string]any); ok && m[key] == k {
							return same(withoutTimes(m), withoutTimes(v)) && !same(m, old)
						}
					}
					return false
				},
			})
		}
		return
	}
	v := g.itemValue(item, nil, path)
	g.out = append(g.out, Probe{
		Path: p + "[+]",
		Apply: func(obj map[string]any) {
			l, _ := get(obj, path)
			ll, _ := l.([]any)
			set(obj, path, append(slices.Clone(ll), v))
		},
		Took: func(obj map[string]any) bool {
			l, _ := get(obj, path)
			ll, _ := l.([]any)
			return len(ll) == len(list)+1
		},
	})
	if len(list) > 0 {
		g.out = append(g.out, Probe{
			Path:  p + "[-]",
			Apply: func(obj map[string]any) { set(obj, path, slices.Clone(list[1:])) },
			Took: func(obj map[string]any) bool {
				l, _ := get(obj, path)
				ll, _ := l.([]any)
				return len(ll) == len(list)-1
			},
		})
	}
}

// listKey is the field that keys a list's items, as the schema says.
func listKey(sc map[string]any) string {
	if keys, ok := sc["x-kubernetes-list-map-keys"].([]any); ok && len(keys) == 1 {
		k, _ := keys[0].(string)
		return k
	}
	k, _ := sc["x-kubernetes-patch-merge-key"].(string)
	return k
}

// withoutTimes drops the time fields an API server may fill in.
func withoutTimes(m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if !strings.HasSuffix(k, "Time") && !strings.HasSuffix(k, "Timestamp") {
			out[k] = v
		}
	}
	return out
}

// same compares values as JSON has them (numbers as float64).
func same(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	if err1 != nil || err2 != nil {
		return false
	}
	var x, y any
	_ = json.Unmarshal(ja, &x)
	_ = json.Unmarshal(jb, &y)
	return reflect.DeepEqual(x, y)
}

func get(obj map[string]any, path []string) (any, bool) {
	var cur any = obj
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = m[k]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

// getMap is the map at path, made where it is missing.
func getMap(obj map[string]any, path []string) (map[string]any, bool) {
	cur := obj
	for _, k := range path {
		next, ok := cur[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[k] = next
		}
		cur = next
	}
	return cur, true
}

func set(obj map[string]any, path []string, v any) {
	parent, _ := getMap(obj, path[:len(path)-1])
	parent[path[len(path)-1]] = v
}

// Matches reports whether an accepted path is one a table's entry names:
// the same path, or under an entry ending in [*] (any key), or the item of
// a keyed list an entry names as a whole list.
func Matches(entry, path string) bool {
	if entry == path {
		return true
	}
	if base, ok := strings.CutSuffix(entry, "[*]"); ok {
		return strings.HasPrefix(path, base+"[")
	}
	return strings.HasPrefix(path, entry+"[") || strings.HasPrefix(path, entry+".")
}
