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
	"slices"
	"sort"
	"strings"
	"time"
)

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
