package manifests

import (
	"fmt"
	"strings"
)

// The CEL expressions the admission policies are made of.

// changedKeys lists the keys of a map (labels, annotations) that differ
// between oldObject and object, except those under prefix.
func changedKeys(field, except string) string {
	return fmt.Sprintf(`(object.metadata.?%[1]s.orValue({}).filter(k, !(%[2]s) && (!(k in oldObject.metadata.?%[1]s.orValue({})) || oldObject.metadata.%[1]s[k] != object.metadata.%[1]s[k])) +
 oldObject.metadata.?%[1]s.orValue({}).filter(k, !(%[2]s) && !(k in object.metadata.?%[1]s.orValue({}))))`, field, except)
}

// oneOf is a CEL condition: k is one of keys.
func oneOf(keys []string) string {
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = "'" + k + "'"
	}
	return "k in [" + strings.Join(quoted, ", ") + "]"
}

func quoted(ss []string) string {
	var q []string
	for _, s := range ss {
		q = append(q, "'"+s+"'")
	}
	return strings.Join(q, ", ")
}

// changedBut is a CEL list of the top-level keys of field (spec, status,
// metadata) that differ between oldObject and object, but those named:
// a field Kubernetes adds later is covered without being named here.
func changedBut(field string, except ...string) string {
	return fmt.Sprintf(`(object.?%[1]s.orValue({}).filter(k, !(k in [%[2]s]) && (!(k in oldObject.?%[1]s.orValue({})) || oldObject.%[1]s[k] != object.%[1]s[k])) +
 oldObject.?%[1]s.orValue({}).filter(k, !(k in [%[2]s]) && !(k in object.?%[1]s.orValue({}))))`, field, quoted(except))
}

// unchangedBut is a CEL condition: field is as it was but for those keys.
func unchangedBut(field string, except ...string) string {
	return "size(" + changedBut(field, except...) + ") == 0"
}
