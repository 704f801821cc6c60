package rights

import (
	"reflect"
	"sort"
	"strings"
	"time"
)

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
