package integration

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// The kustomize base a GitOps tool applies (deploy/kustomize) is a working
// installation, and kustodian-ctl verify proves its admission policies
// enforced, and says which one is not when one is missing.
func TestKustomizeBaseAndVerify(t *testing.T) {
	e := cluster.New(t)
	e.Nodes(1) // verify binds a probe token to a Node
	bin, err := cluster.BinDir(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	ctl := nodecreds.Ctl{Binary: ctlBinary(t), Kubeconfig: e.Kubeconfig, Namespace: "kustodian"}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if out, err := ctl.Run(ctx, "uninstall", "--force"); err != nil {
			t.Errorf("kustodian-ctl uninstall: %v\n%s", err, out)
		}
	})
	apply := exec.CommandContext(e.Ctx, filepath.Join(bin, "kubectl"), "--kubeconfig", e.Kubeconfig,
		"apply", "--server-side", "--field-manager", "gitops", "-k", repoFile(t, "deploy/kustomize"))
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply -k deploy/kustomize: %v\n%s", err, out)
	}
	out, err := ctl.Run(e.Ctx, "verify")
	if err != nil || !strings.Contains(out, "admission policies enforced") {
		t.Fatalf("kustodian-ctl verify after kubectl apply -k: %v\n%s", err, out)
	}
	t.Logf("verify: %s", strings.TrimSpace(out))
	// Something else drops the binding of the policy that keeps each node
	// to its own Node: verify must say so.
	binding := "kustodian-agent-kustodian-nodes"
	if err := e.Client.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Delete(e.Ctx, binding, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting the binding %s: %v", binding, err)
	}
	// The API server stops enforcing a policy some seconds after its
	// binding goes, as it starts some seconds after one is made: verify
	// must fail once it has.
	e.Eventually("verify to fail without the binding "+binding, time.Minute, func(ctx context.Context) error {
		out, err = ctl.Run(ctx, "verify", "--timeout", "3s")
		if err == nil {
			return fmt.Errorf("verify still passes: %s", strings.TrimSpace(out))
		}
		return nil
	})
	if !strings.Contains(out, "not enforced") || !strings.Contains(out, binding) {
		t.Fatalf("verify without the binding %s does not name it:\n%s", binding, out)
	}
	t.Logf("verify without %s: %s", binding, strings.TrimSpace(out))
}
