// Package manpages generates the man pages of both binaries from their
// command trees.
package manpages

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kustodian/kustodian/internal/ctl"
	"github.com/kustodian/kustodian/internal/nodecmd"
)

// date is fixed: the pages are checked in and compared with what the code
// generates, and a page dated today would differ tomorrow.
var date = time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)

// Write writes every page into dir (created if missing).
func Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, root := range []*cobra.Command{
		nodecmd.NewRoot(),
		ctl.NewRoot(genericiooptions.NewTestIOStreamsDiscard(), "kustodian-ctl"),
	} {
		root.DisableAutoGenTag = true
		header := &doc.GenManHeader{Title: root.Name(), Section: "1", Source: "Kustodian", Manual: "Kustodian Manual", Date: &date}
		if err := doc.GenManTree(root, header, dir); err != nil {
			return fmt.Errorf("man pages of %s: %w", root.Name(), err)
		}
	}
	return nil
}
