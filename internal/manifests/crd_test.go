package manifests

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// kubectl explain maintenancepolicy.spec (maintenancerollout.spec) shows
// each field's description: every field of the spec must have one.
func TestEveryPolicyFieldIsDocumented(t *testing.T) {
	// How many fields each spec has at least: a walk that finds fewer has
	// read the wrong schema.
	for _, c := range []struct {
		o      Object
		fields int
	}{{PolicyCRD(), 30}, {RolloutCRD(), 30}, {RequestCRD(), 4}} {
		crd := c.o.Object.(*unstructured.Unstructured)
		t.Run(crd.GetName(), func(t *testing.T) { everyFieldDocumented(t, crd, c.fields) })
	}
}

func everyFieldDocumented(t *testing.T, crd *unstructured.Unstructured, least int) {
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
	if fields < least {
		t.Errorf("only %d fields walked", fields)
	}
}

// Every schema in the CRDs uses only OpenAPI's keywords: a stray key (a
// comma in an unquoted YAML flow-mapping description makes one) is dropped
// by the API server, and the stored CRD then differs from the applied one
// (a GitOps tool's apply then conflicts with install's).
func TestCRDSchemasUseOnlyKnownKeywords(t *testing.T) {
	known := map[string]bool{"type": true, "description": true, "properties": true, "items": true, "required": true,
		"enum": true, "pattern": true, "maxLength": true, "minLength": true, "minimum": true, "maximum": true,
		"maxItems": true, "minItems": true, "format": true, "default": true, "additionalProperties": true, "nullable": true}
	for _, o := range []Object{PolicyCRD(), RolloutCRD(), RequestCRD()} {
		crd := o.Object.(*unstructured.Unstructured)
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		root, _, _ := unstructured.NestedMap(versions[0].(map[string]any), "schema", "openAPIV3Schema")
		var walk func(path string, s map[string]any)
		walk = func(path string, s map[string]any) {
			for k, v := range s {
				if !known[k] && !strings.HasPrefix(k, "x-kubernetes-") {
					t.Errorf("%s: %s has the key %q, no OpenAPI keyword", crd.GetName(), path, k)
				}
				switch k {
				case "properties":
					for name, p := range v.(map[string]any) {
						walk(path+"."+name, p.(map[string]any))
					}
				case "items", "additionalProperties":
					if m, ok := v.(map[string]any); ok {
						walk(path+"[]", m)
					}
				}
			}
		}
		walk("", root)
	}
}
