package status

import (
	"strings"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/policy"
)

func TestPolicies(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC) // a Monday
	zones := &policy.MaintenancePolicy{ObjectMeta: metav1.ObjectMeta{Name: "zones"}, Spec: policy.Spec{
		NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "worker"}},
		GroupBy:      "zone", Concurrency: 2,
		Windows: []policy.Window{{Days: []string{"Sat"}, Start: "02:00", End: "06:00"}},
	}}
	node := func(name string, labels map[string]string) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	nodes := []corev1.Node{
		node("a1", map[string]string{"role": "worker", "zone": "a"}), node("a2", map[string]string{"role": "worker", "zone": "a"}),
		node("b1", map[string]string{"role": "worker", "zone": "b"}), node("x", map[string]string{"role": "worker"}),
		node("cp", nil),
	}
	h := "a2"
	leases := []coordv1.Lease{{ObjectMeta: metav1.ObjectMeta{Name: "lock-zones-a-1"}, Spec: coordv1.LeaseSpec{HolderIdentity: &h}}}
	got := Policies([]*policy.MaintenancePolicy{zones}, nodes, leases, now)
	if len(got.Items) != 2 || got.Items[0].Name != "default" || got.Items[1].Name != "zones" {
		t.Fatalf("items %+v", got.Items)
	}
	def, z := got.Items[0], got.Items[1]
	if def.Nodes != 1 || def.Window != "always" || len(def.Groups) != 1 || def.Groups[0].Name != "default" || def.Groups[0].Slots != 1 {
		t.Errorf("default: %+v", def)
	}
	if z.Nodes != 4 || len(z.Groups) != 2 || z.Groups[0].Name != "zones/a" || z.Groups[0].Nodes != 2 || z.Groups[0].InUse != 1 ||
		z.Groups[0].Slots != 2 || z.Groups[0].Holder[0] != "a2" || z.Groups[1].InUse != 0 {
		t.Errorf("zones: %+v", z)
	}
	if z.Window != "closed: next opens Sat 02:00 UTC" {
		t.Errorf("window %q", z.Window)
	}
	if len(z.Errors) != 1 || !strings.HasPrefix(z.Errors[0], "x: ") || !strings.Contains(z.Errors[0], "lacks") {
		t.Errorf("errors %v", z.Errors)
	}
}
