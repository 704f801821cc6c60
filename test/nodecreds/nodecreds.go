// Package nodecreds gives tests what a real fleet has: Kustodian installed
// in the test's namespace with kustodian-ctl install (ServiceAccount, RBAC,
// admission policies) and each node's own kubeconfig from kustodian-ctl
// kubeconfig, so that the agents under test run on node-scoped rights.
package nodecreds

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/kustodian/kustodian/internal/manifests"
	"github.com/kustodian/kustodian/internal/policy"
	"github.com/kustodian/kustodian/test/buildbin"
	"github.com/kustodian/kustodian/test/cluster"
)

var state struct {
	sync.Mutex
	installed map[string]bool   // namespace
	files     map[string]string // namespace/node → kubeconfig
}

// Ctl is kustodian-ctl run with an admin kubeconfig in one namespace.
type Ctl struct {
	Binary, Kubeconfig, Namespace string
}

// Run runs it with args and returns its output.
func (c Ctl) Run(ctx context.Context, args ...string) (string, error) {
	out, err := c.Command(ctx, args...).CombinedOutput()
	return string(out), err
}

// Install runs kustodian-ctl install, with Kured's DaemonSet in
// kuredNamespace and extra flags.
func (c Ctl) Install(ctx context.Context, kuredNamespace string, extra ...string) error {
	if out, err := c.Run(ctx, append([]string{"install", "--kured-namespace", kuredNamespace}, extra...)...); err != nil {
		return fmt.Errorf("kustodian-ctl install: %w\n%s", err, out)
	}
	return nil
}

// Command is kustodian-ctl with args, to start.
func (c Ctl) Command(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, c.Binary, append([]string{"--kubeconfig", c.Kubeconfig, "-n", c.Namespace}, args...)...)
}

// NodeKubeconfig writes node's own kubeconfig to path.
func (c Ctl) NodeKubeconfig(ctx context.Context, node, path string) error {
	if out, err := c.Run(ctx, "kubeconfig", node, "--output-file", path); err != nil {
		return fmt.Errorf("kustodian-ctl kubeconfig %s: %w\n%s", node, err, out)
	}
	return nil
}

// CtlFor is kustodian-ctl with the test's admin kubeconfig and namespace.
func CtlFor(e *cluster.Env) Ctl {
	return Ctl{Binary: buildbin.Ctl(e.T), Kubeconfig: e.Kubeconfig, Namespace: e.Namespace}
}

// Install runs kustodian-ctl install for the test's namespace, once per
// test, with Kured's DaemonSet in kuredNamespace, and removes what it put
// outside the namespace when the test ends. Kubeconfig installs with Kured
// in the test's namespace unless the test installed first. extra are more
// flags of install.
func Install(e *cluster.Env, kuredNamespace string, extra ...string) {
	e.T.Helper()
	state.Lock()
	defer state.Unlock()
	// A namespace of one name may be in several clusters (a fleet's).
	installed := e.Kubeconfig + "|" + e.Namespace
	if state.installed[installed] {
		return
	}
	if err := CtlFor(e).Install(e.Ctx, kuredNamespace, extra...); err != nil {
		e.T.Fatal(err)
	}
	if state.installed == nil {
		state.installed = map[string]bool{}
	}
	state.installed[installed] = true
	e.T.Cleanup(func() {
		state.Lock()
		delete(state.installed, installed)
		state.Unlock()
		if err := Uninstall(e.Config, e.Namespace, kuredNamespace); err != nil {
			e.T.Errorf("removing the installation of %s: %v", e.Namespace, err)
		}
	})
}

// Uninstall deletes what an installation put outside its namespace (the
// namespace itself goes with the test's).
func Uninstall(rc *rest.Config, ns, kuredNamespace string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	for _, obj := range manifests.Objects(manifests.Options{Namespace: ns, KuredNamespace: kuredNamespace, KuredDaemonSet: "kured"}) {
		b, err := json.Marshal(obj.Object)
		if err != nil {
			return err
		}
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON(b); err != nil {
			return err
		}
		if u.GetNamespace() == ns || (u.GetNamespace() == "" && u.GetName() == ns) {
			continue
		}
		if obj.Resource == manifests.GVRCustomResourceDefinition {
			continue // shared by every installation in the cluster
		}
		var ri dynamic.ResourceInterface = dyn.Resource(obj.Resource)
		if u.GetNamespace() != "" {
			ri = dyn.Resource(obj.Resource).Namespace(u.GetNamespace())
		}
		if err := ri.Delete(ctx, u.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting %s %s: %w", obj.Resource.Resource, u.GetName(), err)
		}
	}
	return nil
}

// Kubeconfig is node's own kubeconfig (kustodian-ctl kubeconfig, a token
// bound to the Node, the CA inlined), minted once per test and node.
func Kubeconfig(e *cluster.Env, node string) string {
	e.T.Helper()
	Install(e, e.Namespace)
	key := e.Kubeconfig + "|" + e.Namespace + "/" + node
	state.Lock()
	path, ok := state.files[key]
	state.Unlock()
	if ok {
		return path
	}
	path = filepath.Join(e.T.TempDir(), node+".kubeconfig")
	if err := CtlFor(e).NodeKubeconfig(e.Ctx, node, path); err != nil {
		e.T.Fatal(err)
	}
	state.Lock()
	if state.files == nil {
		state.files = map[string]string{}
	}
	state.files[key] = path
	state.Unlock()
	e.T.Cleanup(func() {
		state.Lock()
		delete(state.files, key)
		state.Unlock()
	})
	return path
}

// ApplyPolicy server-side-applies the MaintenancePolicy name with spec in
// namespace ns (field manager kustodian-test), replacing an earlier spec.
func ApplyPolicy(ctx context.Context, rc *rest.Config, ns, name string, spec map[string]any) error {
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": policy.Group + "/" + policy.Version, "kind": policy.Kind,
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
	}}
	body, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	force := true
	_, err = dyn.Resource(policy.GVR).Namespace(ns).Patch(ctx, name, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "kustodian-test", Force: &force})
	if err != nil {
		return fmt.Errorf("applying MaintenancePolicy %s/%s: %w", ns, name, err)
	}
	return nil
}
