package manifests

import (
	_ "embed"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// crdYAML is the MaintenancePolicy CustomResourceDefinition (docs/policy.md):
// its schema and CEL rules refuse bad policies at kubectl apply, naming
// the field, and its descriptions are what kubectl explain shows.
//
//go:embed crd.yaml
var crdYAML []byte

// GVRCustomResourceDefinition is where the CRD is written.
var GVRCustomResourceDefinition = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// CRDName is the name of the MaintenancePolicy CRD.
const CRDName = "maintenancepolicies.kustodian.io"

// PolicyCRD is the MaintenancePolicy CustomResourceDefinition. Unlike the
// other objects it is shared by every installation in the cluster.
func PolicyCRD() Object {
	var m map[string]any
	if err := yaml.Unmarshal(crdYAML, &m); err != nil {
		panic(fmt.Sprintf("the embedded CRD does not parse: %v", err)) // a build defect, caught by the tests
	}
	return Object{GVRCustomResourceDefinition, &unstructured.Unstructured{Object: m}}
}
