package decide

import (
	"os/exec"
	"strings"
	"testing"
)

// decide is a pure function of what the agent observed: it must not be able
// to reach the API server or the host, so neither client-go nor file
// watches may be among its dependencies.
func TestDecideNeedsNoClientOrWatches(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/kustodian/kustodian/internal/decide").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 20 {
		t.Fatalf("go list found only %d dependencies; the check would prove nothing", len(deps))
	}
	for _, dep := range deps {
		for _, banned := range []string{"k8s.io/client-go", "github.com/fsnotify/fsnotify", "github.com/godbus/dbus", "github.com/coreos/go-systemd",
			"github.com/kustodian/kustodian/internal/lock/lockapi", "github.com/kustodian/kustodian/internal/kured/kuredapi", "github.com/kustodian/kustodian/internal/hostfiles/hostwatch"} {
			if strings.HasPrefix(dep, banned) {
				t.Errorf("decide depends on %s", dep)
			}
		}
	}
}
