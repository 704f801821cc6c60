package ctl

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
)

func TestInstallRefusesAnOlderServer(t *testing.T) {
	for _, tc := range []struct {
		major, minor, git string
		want              string // "" when supported
	}{
		{"1", "37", "v1.37.1", ""},
		{"1", "34", "v1.34.4", ""},
		{"1", "34+", "v1.34.2-eks-1234", ""},
		{"1", "38", "v1.38.0", ""},
		{"1", "33", "v1.33.7", "the API server is Kubernetes v1.33.7; Kustodian needs 1.34 or newer (tested with 1.34 and 1.37): upgrade the cluster first"},
		{"1", "30+", "v1.30.9-gke.1", "the API server is Kubernetes v1.30.9-gke.1; Kustodian needs 1.34 or newer"},
		{"", "", "v0.0.0-master", `the API server says it is Kubernetes "v0.0.0-master"`},
	} {
		client := fake.NewClientset()
		client.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &version.Info{Major: tc.major, Minor: tc.minor, GitVersion: tc.git}
		err := supportedServer(client)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.git, err)
		case tc.want != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.want) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%s: %v, want %q", tc.git, err, tc.want)
		}
	}
}
