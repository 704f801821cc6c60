package integration

import (
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// denied checks that err is the admission policy's refusal saying want.
func denied(t *testing.T, what string, err error, want string) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s: allowed, want it refused with %q", what, want)
	case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want):
		t.Errorf("%s: %v, want forbidden with %q", what, err, want)
	}
}

// clientFor is a clientset for a kubeconfig file.
func clientFor(t *testing.T, path string) kubernetes.Interface {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		t.Fatal(err)
	}
	return kubernetes.NewForConfigOrDie(rc)
}
