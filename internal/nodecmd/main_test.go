package nodecmd

import (
	"testing"

	"github.com/kustodian/kustodian/internal/notify"
	"github.com/kustodian/kustodian/internal/notify/notifytest"
)

// The notify URLs of a configuration are checked by the kustodian-notify
// helper, as in the agent.
func TestMain(m *testing.M) { notifytest.Main(m.Run, func(p string) { notify.Helper = p }) }
