package lock

import (
	"strings"
	"testing"

	coordv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kustodian/kustodian/internal/policy"
)

func TestOverbooked(t *testing.T) {
	p := policy.Effective{Name: "p", Spec: policy.Spec{Health: policy.Health{MaxUnavailable: ptr(intstr.FromInt32(1))}}}
	nodes := []NodeHealth{{Name: "me", Policy: "p", Ready: true}, {Name: "b", Policy: "p", Ready: true}, {Name: "c", Policy: "p", Ready: true}}
	for _, tc := range []struct {
		name  string
		locks []lockHolder
		nodes []NodeHealth
		over  bool
		why   string
	}{
		{"alone", []lockHolder{{"p", "me", "100"}}, nodes, false, ""},
		{"another took its lock first", []lockHolder{{"p", "me", "100"}, {"p", "b", "99"}}, nodes, true, "2 of 1 allowed nodes unavailable: b took its lock first"},
		{"another took its lock after: it yields", []lockHolder{{"p", "me", "100"}, {"p", "b", "101"}}, nodes, false, ""},
		{"versions compare as numbers", []lockHolder{{"p", "b", "99999"}}, nodes, false, ""},
		{"another policy's lock does not count", []lockHolder{{"q", "b", "99"}}, nodes, false, ""},
		{"a cordoned node counts", nil, []NodeHealth{{Name: "me", Policy: "p", Ready: true}, {Name: "c", Policy: "p", Ready: true, Unschedulable: true}}, true, "c cordoned"},
		{"an unreadable version counts", []lockHolder{{"p", "b", "x"}}, nodes, true, "b took its lock first"},
	} {
		over, why := overbooked("me", "100", p, tc.locks, tc.nodes)
		if over != tc.over || !strings.Contains(why, tc.why) {
			t.Errorf("%s: got %v %q, want %v %q", tc.name, over, why, tc.over, tc.why)
		}
	}
	if over, _ := overbooked("me", "100", policy.Effective{Name: "p"}, []lockHolder{{"p", "b", "1"}}, nodes); over {
		t.Error("no maxUnavailable: never overbooked")
	}
}

// The version that counts as this node's is that of the last lock it took
// of the policy: a lock of another policy, or an older one, does not make
// it the earlier taker.
func TestOverbookedUsesTheLockJustTaken(t *testing.T) {
	p := policy.Effective{Name: "p", Spec: policy.Spec{Health: policy.Health{MaxUnavailable: ptr(intstr.FromInt32(1))}}}
	nodes := []NodeHealth{{Name: "me", Policy: "p", Ready: true}, {Name: "b", Policy: "p", Ready: true}}
	take := func(g GroupRef, slot int, holder, version string) *coordv1.Lease {
		l := lockOf(g.LockName(slot), g, holder)
		l.ResourceVersion = version
		return l
	}
	a := GroupRef{Policy: "p", Group: "a"}
	locks := []*coordv1.Lease{
		take(GroupRef{Policy: "q"}, 0, "me", "10"), // another policy's, older
		take(a, 0, "me", "50"),                     // an older lock of p
		take(a, 1, "b", "100"),
		take(GroupRef{Policy: "p", Group: "z"}, 0, "me", "150"), // the one just taken
	}
	if over, why := Overbooked("me", p, locks, nodes); !over || !strings.Contains(why, "b took its lock first") {
		t.Errorf("me took its last lock after b: got %v %q", over, why)
	}
	if over, _ := Overbooked("me", p, locks[:3], nodes); over {
		t.Error("me took its lock of p before b: it keeps it")
	}
	if over, _ := Overbooked("me", p, locks[2:3], nodes); over {
		t.Error("me holds no lock of p: nothing to give back")
	}
}

func ptr[T any](v T) *T { return &v }
