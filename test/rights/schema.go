package rights

import (
	"encoding/json"
	"fmt"
	"strings"
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
