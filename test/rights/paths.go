package rights

import (
	"encoding/json"
	"reflect"
	"strings"
)

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
