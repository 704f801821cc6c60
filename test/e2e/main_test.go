// Package e2e holds end-to-end tests on real systemd hosts (systemd-nspawn
// containers, see test/nspawn) against the local control plane.
//
// Most tests run side by side (t.Parallel; make test's -parallel bounds how
// many): each has its own namespace, Nodes and hosts, and spends most of its
// time waiting for boots, reboots and apt. The others run first, one at a
// time: the one that creates Kured's DaemonSet in kube-system, which every
// host's agent reads by default (kured.enabled: auto), and the signed
// rollout, which counts every Node that runs rollouts.
package e2e

import (
	"testing"

	"github.com/kustodian/kustodian/test/cluster"
)

func TestMain(m *testing.M) { cluster.Main(m) }
