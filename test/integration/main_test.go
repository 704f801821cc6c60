// Package integration holds Kustodian's integration tests. They run against a
// real control plane (see test/cluster) that TestMain starts once for the package.
package integration

import (
	"testing"

	"github.com/kustodian/kustodian/test/cluster"
)

func TestMain(m *testing.M) { cluster.Main(m) }
