package status_test

import (
	"strings"
	"testing"

	"github.com/kustodian/kustodian/internal/status"
	"github.com/kustodian/kustodian/internal/status/statustest"
)

func TestBuild(t *testing.T) {
	s := status.Build(statustest.Fixture())
	if !s.Paused || s.PausedReason != "incident 42" || s.APIVersion != status.APIVersion || s.Kind != status.Kind {
		t.Errorf("header: %+v", s)
	}
	if len(s.Locks) != 1 || s.Locks[0].Holder != "n1" || s.Locks[0].Group != "default" || s.Locks[0].Since == nil {
		t.Errorf("locks: %+v", s.Locks)
	}
	if s.Kured == nil || len(s.Kured.Holders) != 1 || s.Kured.Holders[0] != "kustodian:n1" {
		t.Errorf("kured: %+v", s.Kured)
	}
	var order []string
	for _, n := range s.Nodes {
		order = append(order, n.Name+"="+string(n.State))
	}
	byName := map[string]status.Node{}
	for _, n := range s.Nodes {
		byName[n.Name] = n
	}
	if byName["n3"].QueuePosition != 1 || byName["n2"].QueuePosition != 2 || byName["n4"].QueuePosition != 0 {
		t.Errorf("queue positions n3=%d n2=%d n4=%d, want 1, 2, 0 (dead)", byName["n3"].QueuePosition, byName["n2"].QueuePosition, byName["n4"].QueuePosition)
	}
	if byName["n4"].Live || !byName["n3"].Live {
		t.Error("liveness wrong")
	}
	if byName["n1"].CordonedBy != "kustodian" || byName["n5"].CordonedBy != "other" || byName["n6"].CordonedBy != "" {
		t.Errorf("cordoned by: n1=%q n5=%q n6=%q", byName["n1"].CordonedBy, byName["n5"].CordonedBy, byName["n6"].CordonedBy)
	}
	if byName["n4"].HasNode {
		t.Error("n4 has no Node object")
	}
	if got, want := strings.Join(order, " "), "n1=InMaintenance n3=Waiting n2=Waiting n4=Waiting n5=Idle n6=Idle"; got != want {
		t.Errorf("order %s, want %s", got, want)
	}
	var queue []string
	for _, n := range s.Queue() {
		queue = append(queue, n.Name)
	}
	if got := queue; len(got) != 3 || got[0] != "n3" || got[1] != "n2" || got[2] != "n4" {
		t.Errorf("queue %v, want [n3 n2 n4]", got)
	}
}

// A record's text reaches an operator's terminal: a compromised node must
// not be able to send escape sequences or reorder text with bidi controls.
func TestBuildMakesRecordTextPrintable(t *testing.T) {
	in := statustest.Fixture()
	for i := range in.Leases {
		l := &in.Leases[i]
		if l.Name == "node-n3" {
			l.Annotations["kustodian.io/message"] = "ok\x1b]0;pwned\x07\x1b[2J\r\nnext\u202eline\u200b\xff"
			l.Annotations["kustodian.io/state"] = "Waiting\x1b[31m"
		}
	}
	s := status.Build(in)
	var n3 *status.Node
	for i := range s.Nodes {
		if s.Nodes[i].Name == "n3" {
			n3 = &s.Nodes[i]
		}
	}
	if n3 == nil {
		t.Fatal("n3 missing")
	}
	if want := `ok\x1b]0;pwned\x07\x1b[2J\x0d\x0anext\u202eline\u200b\ufffd`; n3.Message != want {
		t.Errorf("message %q, want %q", n3.Message, want)
	}
	if n3.State != `Waiting\x1b[31m` {
		t.Errorf("state %q", n3.State)
	}
	for _, s := range []string{"plain text: position 2 of 7", "zone eu-1 — Zürich 日本"} {
		if got := status.Printable(s); got != s {
			t.Errorf("Printable(%q) = %q, want it unchanged", s, got)
		}
	}
}

// A record in a format newer than this build reads is shown as read,
// saying so, and is given no place in the queue.
func TestBuildSaysARecordIsInANewerFormat(t *testing.T) {
	in := statustest.Fixture()
	for i := range in.Leases {
		if l := &in.Leases[i]; l.Name == "node-n3" {
			l.Annotations["kustodian.io/format"] = "2"
		}
	}
	s := status.Build(in)
	for _, n := range s.Nodes {
		switch n.Name {
		case "n3":
			if n.QueuePosition != 0 || !strings.HasPrefix(n.Message, `record in format "2", which this kustodian-ctl does not read (upgrade it); as read: `) {
				t.Errorf("n3: position %d, message %q", n.QueuePosition, n.Message)
			}
		case "n2":
			if n.QueuePosition != 1 {
				t.Errorf("n2: position %d, want 1 (n3 is not read)", n.QueuePosition)
			}
		}
	}
}
