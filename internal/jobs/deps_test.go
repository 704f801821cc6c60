package jobs

import (
	"testing"

	"github.com/kustodian/kustodian/test/pure"
)

// A job's next step (step.go) is a pure function of the job and a clock;
// the store beside it (jobs.go) is the package's one use of the host.
func TestJobsDecidePurely(t *testing.T) {
	pure.Deps(t, "github.com/kustodian/kustodian/internal/jobs", pure.Cluster)
	pure.Files(t, []string{"step.go"}, append(append([]string{}, pure.Host...), pure.Cluster...))
}
