package manifests

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// kubectl explain maintenancepolicy.spec (maintenancerollout.spec) shows
// each field's description: every field of the spec must have one.
func TestEveryPolicyFieldIsDocumented(t *testing.T) {
	for _, o := range []Object{PolicyCRD(), RolloutCRD()} {
		crd := o.Object.(*unstructured.Unstructured)
		t.Run(crd.GetName(), func(t *testing.T) { everyFieldDocumented(t, crd) })
	}
}

func everyFieldDocumented(t *testing.T, crd *unstructured.Unstructured) {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	if len(versions) != 1 {
		t.Fatalf("%d versions", len(versions))
	}
	schema, ok, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema", "properties", "spec")
	if !ok {
		t.Fatal("no spec schema")
	}
	fields := 0
	var walk func(path string, s map[string]any)
	walk = func(path string, s map[string]any) {
		fields++
		if d, _ := s["description"].(string); d == "" {
			t.Errorf("%s has no description", path)
		}
		props, _ := s["properties"].(map[string]any)
		for name, p := range props {
			walk(path+"."+name, p.(map[string]any))
		}
		if items, ok := s["items"].(map[string]any); ok {
			if _, hasProps := items["properties"]; hasProps {
				for name, p := range items["properties"].(map[string]any) {
					walk(path+"[]."+name, p.(map[string]any))
				}
			}
		}
	}
	walk("spec", schema)
	if fields < 30 {
		t.Errorf("only %d fields walked", fields)
	}
}
