package rollout

import (
	"testing"

	"github.com/kustodian/kustodian/test/pure"
)

// Which node takes a rollout when is a pure function of the rollout, the
// nodes and a clock: the files that decide reach neither the host nor the
// API server (reading trusted keys, in sign.go, is the package's one use of
// the host), and the package reaches no API client.
func TestRolloutDecidesPurely(t *testing.T) {
	pure.Deps(t, "github.com/kustodian/kustodian/internal/rollout", pure.Cluster)
	pure.Files(t, []string{"plan.go", "decide.go", "summary.go", "validate.go", "manifest.go"}, append(append([]string{}, pure.Host...), pure.Cluster...))
}
