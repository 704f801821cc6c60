package decide

import (
	"testing"

	"github.com/kustodian/kustodian/test/pure"
)

// decide is a pure function of what the agent observed: it must not be able
// to reach the API server or the host, so neither client-go nor file
// watches may be among its dependencies.
func TestDecideNeedsNoClientOrWatches(t *testing.T) {
	pure.Deps(t, "github.com/kustodian/kustodian/internal/decide", append([]string{"github.com/kustodian/kustodian/internal/lock/lockapi",
		"github.com/kustodian/kustodian/internal/kured/kuredapi", "github.com/kustodian/kustodian/internal/hostfiles/hostwatch"}, pure.Cluster...))
}
