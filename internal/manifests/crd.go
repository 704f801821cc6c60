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

// rolloutCRDYAML is the MaintenanceRollout CustomResourceDefinition
// (docs/rollout.md), in the same way.
//
//go:embed rollout-crd.yaml
var rolloutCRDYAML []byte

// requestCRDYAML is the MaintenanceRequest CustomResourceDefinition
// (docs/ctl.md, request and done), in the same way.
//
//go:embed request-crd.yaml
var requestCRDYAML []byte

// GVRCustomResourceDefinition is where the CRD is written.
var GVRCustomResourceDefinition = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// The names of the CRDs.
const (
	CRDName        = "maintenancepolicies.kustodian.io"
	RolloutCRDName = "maintenancerollouts.kustodian.io"
	RequestCRDName = "maintenancerequests.kustodian.io"
)

// CRDNames are the CRDs install makes and waits for.
var CRDNames = []string{CRDName, RolloutCRDName, RequestCRDName}

// PolicyCRD is the MaintenancePolicy CustomResourceDefinition. Unlike the
// other objects it is shared by every installation in the cluster.
func PolicyCRD() Object { return crd(crdYAML) }

// RolloutCRD is the MaintenanceRollout CustomResourceDefinition, shared
// like PolicyCRD.
func RolloutCRD() Object { return crd(rolloutCRDYAML) }

// RequestCRD is the MaintenanceRequest CustomResourceDefinition, shared
// like PolicyCRD.
func RequestCRD() Object { return crd(requestCRDYAML) }

func crd(b []byte) Object {
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		panic(fmt.Sprintf("an embedded CRD does not parse: %v", err)) // a build defect, caught by the tests
	}
	return Object{GVRCustomResourceDefinition, &unstructured.Unstructured{Object: m}}
}
