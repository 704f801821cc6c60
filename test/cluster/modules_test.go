package cluster

import (
	"encoding/json"
	"os/exec"
	"testing"
)

// The control plane is built from test/tools's module in the same Go build
// cache as Kustodian's own code (make test builds both). A package they share
// (k8s.io/api, client-go, apimachinery, protobuf, golang.org/x/...) is
// compiled once only if both modules use the same version of it and of
// everything it imports; one differing version under k8s.io/api compiles
// Kubernetes' client side twice. Measured on two cores with an empty build
// cache, after go vet ./...: the control plane's build took 590 s with
// differing versions, 426 s with these. So every module both go.mod files
// name is at one version, save those listed here with the reason no shared
// package needs it.
var versionsAllowedToDiffer = map[string]string{
	// Kustodian reaches it only through nfpm (go-git's file system), the
	// control plane through kube-controller-manager's volume plugins.
	"github.com/cyphar/filepath-securejoin": "no package both build imports it",
}

func TestToolsModuleUsesTheMainModulesVersions(t *testing.T) {
	root, err := buildScript()
	if err != nil {
		t.Fatal(err)
	}
	tools := moduleVersions(t, root[:len(root)-len("/build.sh")]+"/go.mod")
	main := moduleVersions(t, root[:len(root)-len("/test/tools/build.sh")]+"/go.mod")
	shared := 0
	for path, v := range tools {
		mv, ok := main[path]
		if !ok {
			continue
		}
		shared++
		if mv != v && versionsAllowedToDiffer[path] == "" {
			t.Errorf("%s: %s in go.mod, %s in test/tools/go.mod; `go get` the newer of the two in the other module so both compile it once", path, mv, v)
		}
	}
	// k8s.io/client-go, apimachinery, api and more are shared; a parse that
	// found none has read the wrong files.
	if shared < 20 {
		t.Fatalf("only %d modules named by both go.mod files; want the k8s.io client side among them", shared)
	}
}

// moduleVersions returns each required module's version, replacements
// applied (test/tools replaces k8s.io/kubernetes's v0.0.0 staging
// requirements with released versions), as `go mod edit -json` reads them.
func moduleVersions(t *testing.T, gomod string) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "mod", "edit", "-json", gomod).Output()
	if err != nil {
		t.Fatalf("go mod edit -json %s: %v", gomod, err)
	}
	type module struct{ Path, Version string }
	var f struct {
		Require []module
		Replace []struct{ Old, New module }
	}
	if err := json.Unmarshal(out, &f); err != nil {
		t.Fatalf("%s: %v", gomod, err)
	}
	versions := map[string]string{}
	for _, r := range f.Require {
		versions[r.Path] = r.Version
	}
	for _, r := range f.Replace {
		if _, ok := versions[r.Old.Path]; ok && r.New.Version != "" {
			versions[r.Old.Path] = r.New.Version
		}
	}
	return versions
}
