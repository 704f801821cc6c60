package rollout

import (
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// FromUnstructured reads a MaintenanceRollout as the dynamic client and
// its informers return it.
func FromUnstructured(u *unstructured.Unstructured) (*MaintenanceRollout, error) {
	var r MaintenanceRollout
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r); err != nil {
		return nil, fmt.Errorf("MaintenanceRollout %s: %w", u.GetName(), err)
	}
	return &r, nil
}

// StatusObject is u with its status replaced by st, for UpdateStatus: the
// rest of u (its resourceVersion above all) as read. What st has as u has
// it (the set, an entry) goes back exactly as u holds it, not encoded
// again: the admission policy compares the other nodes' entries and the
// set as written, and another encoding of the same values (an empty field
// left out, a time in another zone) would be taken for a change.
func StatusObject(u *unstructured.Unstructured, st Status) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return nil, err
	}
	old, err := FromUnstructured(u)
	if err == nil {
		rawPatch, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "patch")
		if rawPatch != nil && equality.Semantic.DeepEqual(old.Status.Patch, st.Patch) {
			m["patch"] = runtime.DeepCopyJSONValue(rawPatch)
		}
		rawNodes, _, _ := unstructured.NestedSlice(u.Object, "status", "nodes")
		nodes, _ := m["nodes"].([]any)
		at := make(map[string]int, len(old.Status.Nodes))
		for j, was := range old.Status.Nodes {
			at[was.Name] = j
		}
		for i, e := range st.Nodes {
			if j, ok := at[e.Name]; ok && i < len(nodes) && j < len(rawNodes) && equality.Semantic.DeepEqual(old.Status.Nodes[j], e) {
				nodes[i] = rawNodes[j]
			}
		}
	}
	out := u.DeepCopy()
	out.Object["status"] = m
	return out, nil
}

// Entry is node's entry in the rollout's status, or nil.
func (r *MaintenanceRollout) Entry(node string) *NodeStatus {
	for i := range r.Status.Nodes {
		if r.Status.Nodes[i].Name == node {
			return &r.Status.Nodes[i]
		}
	}
	return nil
}

// WithEntry is WithEntrySeen with no stage seen to succeed yet: a stage
// that succeeded soaks from now. For a status made up (tests, tools); an
// agent passes what it saw.
func WithEntry(r *MaintenanceRollout, e NodeStatus, nodes []NodeFacts, now time.Time) (Status, error) {
	return WithEntrySeen(r, e, nodes, Room{}, now, nil)
}

// WithEntrySeen is the rollout's status with e as its node's entry (added
// or replaced) and the summary made again (Summarize, with seen).
func WithEntrySeen(r *MaintenanceRollout, e NodeStatus, nodes []NodeFacts, room Room, now time.Time, seen Seen) (Status, error) {
	c := *r
	c.Status.Nodes = append([]NodeStatus(nil), r.Status.Nodes...)
	if old := c.Entry(e.Name); old != nil {
		*old = e
	} else {
		c.Status.Nodes = append(c.Status.Nodes, e)
	}
	c.Status.Conditions = append(c.Status.Conditions[:0:0], r.Status.Conditions...)
	return Summarize(&c, nodes, room, now, seen)
}

// Halted says why no node may start the rollout now, "" when one may:
// aborted, paused, or stopped by the failure of a node it reaches.
func Halted(r *MaintenanceRollout, nodes []NodeFacts) string {
	v, err := newView(r, nodes)
	if err != nil {
		return ""
	}
	return v.halted()
}

// Withdrawn says why a node queued for the rollout, not started, withdraws
// ("" when it stays queued): the rollout was aborted or paused, or a node
// failed for good. A node that rolls back or retries holds new nodes
// back (Halted), not those already queued.
func Withdrawn(r *MaintenanceRollout, nodes []NodeFacts) string {
	switch {
	case r.Spec.Aborted:
		return "the rollout was aborted"
	case r.Spec.Paused:
		return "the rollout is paused"
	}
	v, err := newView(r, nodes)
	if err != nil {
		return ""
	}
	if v.stopped != nil {
		for _, e := range v.entries {
			if e.State == Failed || e.State == RolledBack {
				return fmt.Sprintf("the rollout stopped: node %s is %s", e.Name, e.State)
			}
		}
	}
	return ""
}

// The CRD's bounds of an entry's text.
const (
	MaxMessage  = 1024
	MaxLine     = 512
	MaxLastLine = 10
)

// Bounded is e cut to the CRD's bounds: a script's long output line or a
// long refusal must not make its entry unwritable.
func Bounded(e NodeStatus) NodeStatus {
	e.Message = cut(e.Message, MaxMessage)
	if len(e.LastLines) > MaxLastLine {
		e.LastLines = e.LastLines[len(e.LastLines)-MaxLastLine:]
	}
	lines := make([]string, len(e.LastLines))
	for i, l := range e.LastLines {
		lines[i] = cut(l, MaxLine)
	}
	e.LastLines = lines
	return e
}

// cut shortens s to at most n characters (runes, as the API server counts
// a maxLength), marking the cut.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// EntryPatch is the JSON patch of u's status that writes e, one node's
// entry, and nothing else: it replaces the entry of that name where u has
// it (after a test that the entry there is still that node's), or adds it
// at the end. Entries are never moved or removed, so the patches of
// different nodes do not meet, and none carries the object's
// resourceVersion: a whole fleet writing at once costs each node one
// write. ok is false when u's status has no list of entries (the CRD
// defaults it to an empty list; one older than that does not).
func EntryPatch(u *unstructured.Unstructured, e NodeStatus) (patch []byte, ok bool, err error) {
	nodes, found, err := unstructured.NestedSlice(u.Object, "status", "nodes")
	if err != nil || !found {
		return nil, false, err
	}
	ops := []map[string]any{{"op": "add", "path": "/status/nodes/-", "value": e}}
	for i, n := range nodes {
		if m, _ := n.(map[string]any); m != nil && m["name"] == e.Name {
			at := fmt.Sprintf("/status/nodes/%d", i)
			ops = []map[string]any{{"op": "test", "path": at + "/name", "value": e.Name}, {"op": "replace", "path": at, "value": e}}
			break
		}
	}
	patch, err = json.Marshal(ops)
	return patch, err == nil, err
}

// SummaryDiffers reports whether the summary of st (everything but the
// entries) differs from r's as stored.
func SummaryDiffers(r *MaintenanceRollout, st Status) bool {
	a, b := r.Status, st
	a.Nodes, b.Nodes = nil, nil
	return !equality.Semantic.DeepEqual(a, b)
}
