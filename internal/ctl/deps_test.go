package ctl

import (
	"testing"

	"github.com/kustodian/kustodian/test/pure"
)

// kustodian-ctl runs on admins' machines: it must not depend on D-Bus or
// systemd code, which belong to the node binary, nor on what only the
// agent needs (the drain, file watches, notifications), which made it
// twice as big.
func TestCtlImportsNoHostCode(t *testing.T) {
	pure.Deps(t, "github.com/kustodian/kustodian/cmd/kustodian-ctl", []string{"github.com/godbus/dbus", "github.com/coreos/go-systemd", "github.com/kustodian/kustodian/internal/systemd", "github.com/kustodian/kustodian/internal/agent", "github.com/kustodian/kustodian/internal/login1",
		"k8s.io/kubectl/pkg/drain", "github.com/kustodian/kustodian/internal/drain", "github.com/fsnotify/fsnotify",
		"github.com/containrrr/shoutrrr", "github.com/nicholas-fedor/shoutrrr", "github.com/kustodian/kustodian/internal/notify",
		"k8s.io/client-go/informers", "k8s.io/client-go/listers",
		"k8s.io/cli-runtime/pkg/genericclioptions"})
}

// Nothing in kustodian-ctl may look a method up by a name it computes
// (text/template's field evaluation, or what cli-runtime's
// genericclioptions drags in): it made the binary twice as big (66 MB
// stripped, 30 MB without).
func TestCtlLinksNoMethodLookupByName(t *testing.T) {
	pure.LinksNoMethodLookup(t, "github.com/kustodian/kustodian/cmd/kustodian-ctl")
}
