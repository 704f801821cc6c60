// Package integration holds Kustodian's integration tests. They run against a
// real control plane (see test/cluster) that TestMain starts once for the package.
//
// Most tests run side by side (t.Parallel; make test's -parallel bounds how
// many): each has its own namespace, Nodes and agents. These run first, one
// at a time: the tests that stop a control plane (their own, on ports others
// could take meanwhile), that uninstall (which may delete the CRDs when no
// other namespace holds a policy or rollout), that count every Node of the
// cluster (history, a policy without a selector, rollouts, which reach every
// Node that runs rollouts), and those whose bounds of a few seconds a loaded
// machine could miss (a 3 s lock TTL, an 8 s silence, status --watch within
// a second, the liveness bounds).
package integration

import (
	"testing"

	"github.com/kustodian/kustodian/test/cluster"
)

func TestMain(m *testing.M) { cluster.Main(m) }
