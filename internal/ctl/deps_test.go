package ctl

import (
	"os/exec"
	"strings"
	"testing"
)

// kustodian-ctl runs on admins' machines: it must not depend on D-Bus or
// systemd code, which belong to the node binary, nor on what only the
// agent needs (the drain, file watches, notifications), which made it
// twice as big.
func TestCtlImportsNoHostCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/kustodian/kustodian/cmd/kustodian-ctl").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list found only %d dependencies; the check would prove nothing", len(deps))
	}
	for _, dep := range deps {
		for _, banned := range []string{"github.com/godbus/dbus", "github.com/coreos/go-systemd", "github.com/kustodian/kustodian/internal/systemd", "github.com/kustodian/kustodian/internal/agent", "github.com/kustodian/kustodian/internal/login1",
			"k8s.io/kubectl/pkg/drain", "github.com/kustodian/kustodian/internal/drain", "github.com/fsnotify/fsnotify",
			"github.com/containrrr/shoutrrr", "github.com/nicholas-fedor/shoutrrr", "github.com/kustodian/kustodian/internal/notify",
			"k8s.io/client-go/informers", "k8s.io/client-go/listers"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("kustodian-ctl depends on %s", dep)
			}
		}
	}
}
