package manifests

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// deploy/kustomize is what the code makes (make docs writes it): a GitOps
// user applies exactly what kustodian-ctl install would.
func TestKustomizeBaseIsGenerated(t *testing.T) {
	base, err := KustomizeBase()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join("..", "..", "deploy", "kustomize")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(base) {
		t.Errorf("%s holds %d files, the code makes %d: run make docs", dir, len(entries), len(base))
	}
	for name, want := range base {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Errorf("%v: run make docs", err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s/%s differs from what the code makes: run make docs", dir, name)
		}
	}
	all, err := YAML(Objects(Options{Namespace: "kustodian", KuredNamespace: "kube-system", KuredDaemonSet: "kured"}))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(base["kustodian.yaml"], all) {
		t.Error("kustodian.yaml is not the objects install applies with its defaults")
	}
}
