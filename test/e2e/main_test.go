// Package e2e holds end-to-end tests on real systemd hosts (systemd-nspawn
// containers, see test/nspawn) against the local control plane.
package e2e

import (
	"testing"

	"github.com/kustodian/kustodian/test/cluster"
)

func TestMain(m *testing.M) { cluster.Main(m) }
