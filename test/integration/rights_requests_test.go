package integration

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/kustodian/kustodian/internal/request"
	"github.com/kustodian/kustodian/test/cluster"
)

// requestTargets are a MaintenanceRequest for node a and one for node b,
// made as an admin, whose status the rows judge.
func requestTargets(t *testing.T, e *cluster.Env, dyn dynamic.Interface, a, b string) map[string]target {
	t.Helper()
	gvk := schema.GroupVersionKind{Group: request.Group, Version: request.Version, Kind: request.Kind}
	create := func(node string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": request.Group + "/" + request.Version, "kind": request.Kind,
			"metadata": map[string]any{"generateName": "rights-" + node + "-"},
			"spec":     map[string]any{"nodeName": node, "reason": "rights"},
		}}
		c, err := dyn.Resource(request.GVR).Create(e.Ctx, u, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// Every field of the status, so that each is tried.
		c.Object["status"] = map[string]any{"phase": request.InMaintenance, "message": "m", "startedAt": "2026-12-06T00:00:00Z",
			"endsAt": "2026-12-06T01:00:00Z", "completedAt": "2026-12-06T01:00:00Z"}
		if c, err = dyn.Resource(request.GVR).UpdateStatus(e.Ctx, c, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = dyn.Resource(request.GVR).Delete(e.Ctx, c.GetName(), metav1.DeleteOptions{}) })
		return c
	}
	return map[string]target{
		"a MaintenanceRequest for own Node":     {gvr: request.GVR, gvk: gvk, obj: create(a)},
		"a MaintenanceRequest for another Node": {gvr: request.GVR, gvk: gvk, obj: create(b)},
	}
}
