package nodecmd

import (
	"testing"

	"github.com/kustodian/kustodian/test/pure"
)

// The node's binary (the agent) must not look a method up by a name it
// computes, nor evaluate text/template templates (notification messages
// and silence matchers go through internal/tmpl): the linker would keep
// every exported method, 64 MB stripped instead of 36, and every waiting
// agent would carry the pages.
func TestAgentLinksNoMethodLookupByName(t *testing.T) {
	pure.LinksNoMethodLookup(t, "github.com/kustodian/kustodian/cmd/kustodian")
}
