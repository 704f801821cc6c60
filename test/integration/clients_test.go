package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kustodian/kustodian/test/cluster"
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

// inForce waits until the admission policy named refuses try (a dry run
// it must refuse) with want: a policy install cannot probe (pods, rollouts)
// takes effect when the API server has loaded it. Any other answer fails
// the test.
func inForce(e *cluster.Env, policy, want string, try func(ctx context.Context) error) {
	e.T.Helper()
	e.Eventually("the "+policy+" policy in force", cluster.DefaultTimeout, func(ctx context.Context) error {
		err := try(ctx)
		switch {
		case err == nil:
			return fmt.Errorf("a write the %s policy refuses was allowed", policy)
		case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), want):
			e.T.Fatalf("a write the %s policy refuses: %v, want it refused with %q", policy, err, want)
		}
		return nil
	})
}
