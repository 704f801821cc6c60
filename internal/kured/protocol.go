package kured

import (
	"encoding/json"
	"strings"
	"time"
)

// HolderID is how Kustodian names itself in Kured's lock: never the bare
// node name, or Kured on that node would take the lock for its own and
// release it.
func HolderID(node string) string { return "kustodian:" + node }

// Others returns the holders of the lock other than id, an expired one
// marked so.
func (l Lock) Others(id string, now time.Time) []string {
	var out []string
	for _, h := range l.Holders {
		switch {
		case h.NodeID == "" || h.NodeID == id:
		case h.Expired(now):
			out = append(out, h.NodeID+" (expired)")
		default:
			out = append(out, h.NodeID)
		}
	}
	return out
}

// Full reports whether the lock has no room for id. Expired holders count:
// Kured's nodes take their place, but a Kustodian agent only adds or
// removes its own entry and leaves every other as it is (the admission
// policy holds it to that), so it waits until Kured, or an admin, frees it.
func (l Lock) Full(id string, now time.Time) bool {
	n := 0
	for _, h := range l.Holders {
		if h.NodeID == id {
			return false
		}
		if h.NodeID != "" {
			n++
		}
	}
	if l.MaxOwners > 0 {
		return n >= l.MaxOwners
	}
	return n > 0
}

// Entry is id's entry in Kured's lock as Kustodian writes it, in Kured's
// field order: {"nodeID":..,"metadata":{"unschedulable":false},"created":..,"TTL":0}.
// The admission policy recognises exactly this form.
func Entry(id string, now time.Time) (string, error) {
	h := Holder{NodeID: id, Created: now.UTC().Truncate(time.Second)}
	b, err := json.Marshal(h)
	return string(b), err
}

// Take is the lock's value with entry added, every other byte of it kept:
// a free single lock ("" or nodeID "") becomes entry; a lock of several
// owners gets entry appended to its list. ok is false when there is no
// room (see Full) or the value is not one of Kured's forms.
func Take(value, entry string) (string, bool) {
	if value == "" || strings.HasPrefix(value, `{"nodeID":"",`) {
		return entry, true
	}
	// Kured's form of several owners: {"maxOwners":N,"locks":[...]}.
	rest, ok := strings.CutPrefix(value, `{"maxOwners":`)
	digits := len(rest) - len(strings.TrimLeft(rest, "0123456789"))
	if !ok || digits == 0 || !strings.HasPrefix(rest[digits:], `,"locks":`) || !strings.HasSuffix(rest, "}") {
		return "", false
	}
	// The list runs to the end: nothing else follows it.
	list := strings.TrimSuffix(rest[digits+len(`,"locks":`):], "}")
	if list != "null" && (!strings.HasPrefix(list, "[") || !json.Valid([]byte(list))) {
		return "", false
	}
	switch {
	case strings.HasSuffix(value, `,"locks":null}`):
		return strings.TrimSuffix(value, `null}`) + "[" + entry + "]}", true
	case strings.HasSuffix(value, `[]}`):
		return strings.TrimSuffix(value, `]}`) + entry + "]}", true
	case strings.HasSuffix(value, `]}`):
		return strings.TrimSuffix(value, `]}`) + "," + entry + "]}", true
	}
	return "", false
}

// GiveBack is the lock's value with id's entry, as Take wrote it, removed
// and every other byte kept; ok is false when the value holds no such
// entry.
func GiveBack(value, id string) (string, bool) {
	prefix := `{"nodeID":"` + id + `",`
	i := strings.Index(value, prefix)
	if i < 0 {
		return "", false
	}
	const end = `"TTL":0}`
	j := strings.Index(value[i:], end)
	if j < 0 {
		return "", false
	}
	j += i + len(end)
	if i == 0 && j == len(value) {
		return "", true // the single form: the annotation goes
	}
	switch {
	case i == 0:
		return "", false // the single form with something after it: not Kured's
	case value[i-1] == ',':
		return value[:i-1] + value[j:], true
	case j < len(value) && value[j] == ',':
		return value[:i] + value[j+1:], true
	default:
		return value[:i] + value[j:], true
	}
}
