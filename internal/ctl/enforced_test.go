package ctl

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
)

func TestServesAdmissionPolicies(t *testing.T) {
	client := fake.NewClientset()
	disc := client.Discovery().(*fakediscovery.FakeDiscovery)
	err := servesAdmissionPolicies(client)
	if err == nil || !strings.Contains(err.Error(), "does not serve validatingadmissionpolicies in admissionregistration.k8s.io/v1") {
		t.Errorf("a cluster without the API: %v", err)
	}
	disc.Resources = []*metav1.APIResourceList{{GroupVersion: "admissionregistration.k8s.io/v1",
		APIResources: []metav1.APIResource{{Name: "validatingwebhookconfigurations"}}}}
	if err := servesAdmissionPolicies(client); err == nil {
		t.Error("a cluster with webhooks only passed")
	}
	disc.Resources[0].APIResources = append(disc.Resources[0].APIResources, metav1.APIResource{Name: "validatingadmissionpolicies"})
	if err := servesAdmissionPolicies(client); err != nil {
		t.Errorf("a cluster that serves them: %v", err)
	}
}
