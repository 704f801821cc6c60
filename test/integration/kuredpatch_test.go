package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/dist"
)

// The patch docs/kured.md gives for a Kured installed from its manifest
// (examples/kured/kured-gate-patch.json), applied with kubectl as written
// to Kured's own kured-ds.yaml (from KURED_SRC) carrying an operator's
// flags, keeps every flag in its order and makes the reboot gate the last
// --reboot-sentinel-command, the one Kured takes. (Seen: the strategic-
// merge patch this replaced set the container's whole command list, so an
// operator's flags were lost and --period=10m set silently.)
func TestKuredPatchKeepsTheOperatorsFlags(t *testing.T) {
	t.Parallel()
	src := os.Getenv("KURED_SRC")
	if src == "" {
		t.Fatal("KURED_SRC is not set: make test-integration sets it to the Kured source make kured builds from")
	}
	manifest, err := os.ReadFile(filepath.Join(src, "kured-ds.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ds *appsv1.DaemonSet
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		var d appsv1.DaemonSet
		if err := dec.Decode(&d); err != nil {
			break
		}
		if d.Kind == "DaemonSet" {
			ds = &d
			break
		}
	}
	if ds == nil || len(ds.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%s/kured-ds.yaml: no DaemonSet with one container", src)
	}
	e := cluster.New(t)
	ds.Namespace = e.Namespace
	ds.Spec.Template.Spec.ServiceAccountName = ""
	// Its pods run nowhere: on a shared control plane they would sit on
	// every other test's Nodes (seen: a drained node "left" a kured pod).
	ds.Spec.Template.Spec.NodeSelector = map[string]string{"test.kustodian.io/nowhere": "true"}
	c := &ds.Spec.Template.Spec.Containers[0]
	c.Command = append(c.Command, "--period=1h", "--reboot-days=sat,sun", "--concurrency=2", "--lock-annotation=kured.dev/kured-node-lock")
	before := slices.Clone(c.Command)
	if _, err := e.Client.AppsV1().DaemonSets(e.Namespace).Create(e.Ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	bin, err := cluster.BinDir(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	patch := filepath.Join(dist.RepoRoot(t), "examples", "kured", "kured-gate-patch.json")
	ctx, cancel := context.WithTimeout(e.Ctx, cluster.DefaultTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), "--kubeconfig", e.Kubeconfig, "-n", e.Namespace,
		"patch", "daemonset", ds.Name, "--type=json", "--patch-file", patch).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl patch --type=json --patch-file %s: %v\n%s", patch, err, out)
	}
	got, err := e.Client.AppsV1().DaemonSets(e.Namespace).Get(e.Ctx, ds.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	after := got.Spec.Template.Spec.Containers[0].Command
	if len(after) != len(before)+1 || !slices.Equal(after[:len(before)], before) {
		t.Fatalf("the patch changed the operator's flags:\nbefore %q\nafter  %q", before, after)
	}
	last := ""
	for _, a := range append(slices.Clone(after), got.Spec.Template.Spec.Containers[0].Args...) {
		if v, ok := strings.CutPrefix(a, "--reboot-sentinel-command="); ok {
			last = v
		}
	}
	if last != "/usr/bin/kustodian reboot-gate" {
		t.Errorf("Kured's last --reboot-sentinel-command is %q, want /usr/bin/kustodian reboot-gate: %q", last, after)
	}
}
