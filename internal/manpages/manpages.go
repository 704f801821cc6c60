// Package manpages generates the man pages of both binaries from their
// command trees.
package manpages

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
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
		if err := writeTree(root, dir); err != nil {
			return fmt.Errorf("man pages of %s: %w", root.Name(), err)
		}
	}
	return nil
}

// writeTree writes the page of c and of each command under it, named and
// headed by the command's path: kustodian-ctl-status(1), whose header
// says kustodian-ctl-status (cobra's GenManTree would head every page
// with the title given for the root).
func writeTree(c *cobra.Command, dir string) error {
	for _, sub := range c.Commands() {
		if !sub.IsAvailableCommand() || sub.IsAdditionalHelpTopicCommand() {
			continue
		}
		if err := writeTree(sub, dir); err != nil {
			return err
		}
	}
	name := strings.ReplaceAll(c.CommandPath(), " ", "-")
	f, err := os.Create(filepath.Join(dir, name+".1"))
	if err != nil {
		return err
	}
	header := &doc.GenManHeader{Title: name, Section: "1", Source: "Kustodian", Manual: "Kustodian Manual", Date: &date}
	if err := doc.GenMan(c, header, f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
