package integration

import (
	"os"
	"strings"
	"testing"

	"github.com/kustodian/kustodian/test/cluster"
)

// A host whose reboot sentinel exists: without triggers.rebootRequired the
// agent asks for nothing; with it, but without logind to make the reboot
// (as here, off a systemd host), it asks for nothing either, and says why:
// it could drain the node but not reboot it. The whole path, with the
// reboot, is the end-to-end TestRebootRequiredThroughTheQueue's.
func TestAgentAsksForARebootOnlyWhereItCanMakeIt(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(1)
	a := newAgent(t, e, nodes[0])
	if err := os.WriteFile(a.spec.RebootSentinel(), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	a.start()
	a.exitsZero()
	if _, err := os.Stat(a.requestFile()); !os.IsNotExist(err) {
		t.Fatalf("a reboot was asked for without triggers.rebootRequired (%v)", err)
	}
	if strings.Contains(a.logText(), "needs a reboot") {
		t.Errorf("the agent looked at the host without triggers.rebootRequired:\n%s", a.logText())
	}

	if err := e.ApplyPolicy(`{metadata: {name: reboots}, spec: {triggers: {rebootRequired: true}}}`); err != nil {
		t.Fatal(err)
	}
	a.start()
	a.exitsZero()
	if _, err := os.Stat(a.requestFile()); !os.IsNotExist(err) {
		t.Fatalf("a reboot was asked for on a host without logind (%v)", err)
	}
	if !strings.Contains(a.logText(), "the host needs a reboot, but logind cannot be reached to make it: not asking for one") {
		t.Errorf("the agent did not say why it asks for nothing:\n%s", a.logText())
	}
}
