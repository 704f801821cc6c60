package ctl

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/kustodian/kustodian/test/pure"
)

// kustodian-ctl runs on admins' machines: it must not depend on D-Bus or
// systemd code, which belong to the node binary, nor on what only the
// agent needs (the drain, file watches, notifications), which made it
// twice as big.
func TestCtlImportsNoHostCode(t *testing.T) {
	pure.Deps(t, "github.com/kustodian/kustodian/cmd/kustodian-ctl", []string{"github.com/godbus/dbus", "github.com/coreos/go-systemd", "github.com/kustodian/kustodian/internal/systemd", "github.com/kustodian/kustodian/internal/agent", "github.com/kustodian/kustodian/internal/login1",
		"k8s.io/kubectl/pkg/drain", "github.com/kustodian/kustodian/internal/drain", "github.com/fsnotify/fsnotify",
		"github.com/containrrr/shoutrrr", "github.com/nicholas-fedor/shoutrrr", "github.com/kustodian/kustodian/internal/notify",
		"k8s.io/client-go/informers", "k8s.io/client-go/listers",
		"k8s.io/cli-runtime/pkg/genericclioptions"})
}

// Nothing in kustodian-ctl may look a method up by a name it computes
// (text/template's field evaluation, or what cli-runtime's
// genericclioptions drags in): the linker then keeps every exported method
// of every type, which made the binary twice as big (66 MB stripped, 30 MB
// without). The linker's dependency dump marks such functions.
func TestCtlLinksNoMethodLookupByName(t *testing.T) {
	if testing.Short() {
		t.Skip("links kustodian-ctl; run without -short")
	}
	cmd := exec.Command("go", "build", "-ldflags=-dumpdep", "-o", t.TempDir()+"/kustodian-ctl", "github.com/kustodian/kustodian/cmd/kustodian-ctl")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%.2000s", err, out)
	}
	lines := strings.Split(string(out), "\n")
	if len(lines) < 10000 {
		t.Fatalf("the linker's dump has %d lines; the check would prove nothing", len(lines))
	}
	seen := map[string]bool{}
	for _, line := range lines {
		src, _, ok := strings.Cut(line, " -> ")
		if fn, marked := strings.CutSuffix(src, " <ReflectMethod>"); ok && marked && !seen[fn] {
			seen[fn] = true
			t.Errorf("kustodian-ctl reaches %s, which looks methods up by a computed name", fn)
		}
	}
}
