package judge

import (
	"fmt"
	"sort"
	"strconv"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// fact is one stored change the replay orders: a lock's holder, a Node's
// Kustodian cordon, a record's state.
type fact struct {
	rv       uint64
	kind     string // "lock", "node", "record"
	name     string // the lock, the node
	holder   string // lock: its holder ("" when free)
	group    string // lock: its group
	cordoned bool   // node: Kustodian's cordon is on
	state    string // record: its state (idle when deleted)
	gone     bool   // the object was deleted
}

// rvOf is an object's resource version as a number (the API server's
// counter; 0 when it does not read).
func rvOf(obj metav1.Object) uint64 {
	n, _ := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	return n
}

// lockGroup is a lock's group as the lock says it: its policy label and
// group annotation, named as groupName names a record's.
func lockGroup(l *coordv1.Lease) string {
	return groupName(l.Labels[labelPolicy], l.Annotations[annGroup])
}

// node notes whether Kustodian's cordon is on a Node: unschedulable, and
// marked as Kustodian's.
func (j *Judge) node(typ watch.EventType, obj runtime.Object) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	cordoned := typ != watch.Deleted && n.Spec.Unschedulable && n.Annotations[nodeCordonedMark] == "true"
	j.mu.Lock()
	defer j.mu.Unlock()
	j.evidence = append(j.evidence, fact{rv: rvOf(n), kind: "node", name: n.Name, cordoned: cordoned, gone: typ == watch.Deleted})
}

// replay goes through what the API server stored in its order and notes
// what the agents did against the rules: a Kustodian cordon on a node that
// holds no lock (and whose record is not Failed), more holders of a
// group's locks than it has slots. Only nodes that had a record in the
// namespace count: other tests' nodes share the cluster.
func (j *Judge) replay() []string {
	j.mu.Lock()
	facts := append([]fact(nil), j.evidence...)
	asked := map[string]bool{}
	for n := range j.asked {
		asked[n] = true
	}
	j.mu.Unlock()
	sort.SliceStable(facts, func(a, b int) bool { return facts[a].rv < facts[b].rv })
	holderOf := map[string]string{} // lock → node
	groupOfLock := map[string]string{}
	cordoned := map[string]bool{}
	state := map[string]string{}
	var out []string
	// A violation is told once, when it starts; it may start again.
	now, before := map[string]bool{}, map[string]bool{}
	note := func(key, msg string) {
		now[key] = true
		if !before[key] {
			out = append(out, msg)
		}
	}
	for i, f := range facts {
		switch f.kind {
		case "lock":
			holderOf[f.name], groupOfLock[f.name] = f.holder, f.group
		case "node":
			cordoned[f.name] = f.cordoned
		case "record":
			state[f.name] = f.state
		}
		if i+1 < len(facts) && facts[i+1].rv == f.rv {
			continue // judge once all the changes of one version are in
		}
		before, now = now, map[string]bool{}
		holds := map[string]bool{}
		perGroup := map[string][]string{}
		for l, h := range holderOf {
			if h != "" {
				holds[h] = true
				perGroup[groupOfLock[l]] = append(perGroup[groupOfLock[l]], h)
			}
		}
		for n, c := range cordoned {
			if c && asked[n] && !holds[n] && state[n] != failed {
				note("cordon "+n, fmt.Sprintf("%s carried Kustodian's cordon at resource version %d without holding a lock (record: %s)", n, f.rv, orIdle(state[n])))
			}
		}
		for g, hs := range perGroup {
			slots := j.rules.Slots[g]
			if slots == 0 {
				slots = 1
			}
			if len(hs) > slots {
				sort.Strings(hs)
				note("group "+g, fmt.Sprintf("%d nodes held locks of group %s at resource version %d, %d slots: %v", len(hs), g, f.rv, slots, hs))
			}
		}
	}
	return out
}

func orIdle(s string) string {
	if s == "" {
		return idle
	}
	return s
}
