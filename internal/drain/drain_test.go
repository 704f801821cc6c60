package drain

import (
	"fmt"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestPDBOf(t *testing.T) {
	tooMany := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	tooMany.ErrStatus.Details.Causes = []metav1.StatusCause{{
		Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget web needs 5 healthy pods and has 5 currently",
	}}
	if got := pdbOf(tooMany); got != "PDB web" {
		t.Errorf("pdbOf = %q, want PDB web", got)
	}
	wrapped := fmt.Errorf("evicting: %w", tooMany)
	if got := pdbOf(wrapped); got != "PDB web" {
		t.Errorf("pdbOf(wrapped) = %q", got)
	}
	if got := pdbOf(apierrors.NewTooManyRequests("slow down", 1)); got != "a PodDisruptionBudget" {
		t.Errorf("pdbOf without cause = %q", got)
	}
}

func TestSummary(t *testing.T) {
	for _, tc := range []struct {
		pods    []podState
		refused []string
		want    string
	}{
		{[]podState{{key: "shop/web-1", blocked: "blocked by PDB web"}, {key: "shop/web-0", evicted: true}, {key: "shop/db-0", blocked: "blocked by PDB db"}},
			nil, "draining: 3 pods left, shop/db-0 blocked by PDB db (+1 more blocked)"},
		{[]podState{{key: "a/x", evicted: true}}, nil, "draining: 1 pod left, waiting for a/x to terminate"},
		{[]podState{{key: "a/x", evicted: true}, {key: "a/y", evicted: true}}, nil, "draining: 2 pods left, waiting for a/x and 1 more to terminate"},
		{nil, refusedPods(fmt.Errorf("cannot delete Pods that declare no controller (use --force to override): default/bare, default/bare2")),
			"draining: 2 pods left, default/bare refused: cannot delete Pods that declare no controller (set drain.force to override) (+1 more refused)"},
	} {
		pods := map[types.UID]*podState{}
		for i := range tc.pods {
			pods[types.UID(fmt.Sprint(i))] = &tc.pods[i]
		}
		if got := summary(pods, tc.refused); got != tc.want {
			t.Errorf("summary:\n got %q\nwant %q", got, tc.want)
		}
	}
}
