// Command gendocs writes the man pages of kustodian and kustodian-ctl from
// their cobra command trees, the packages' default configuration file, and
// the cluster side as a kustomize base (deploy/kustomize), and the table of
// every write a node may make into docs/security.md: `make docs`. All
// are checked in, and tests fail when they differ from what the code
// generates.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/kustodian/kustodian/internal/agentopts"
	"github.com/kustodian/kustodian/internal/manifests"
	"github.com/kustodian/kustodian/internal/manpages"
	"github.com/kustodian/kustodian/test/rights"
)

func main() {
	dir, configFile := "docs/man", "packaging/config.yaml"
	if len(os.Args) > 2 {
		dir, configFile = os.Args[1], os.Args[2]
	}
	if err := manpages.Write(dir); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs: "+err.Error())
		os.Exit(1)
	}
	if err := os.WriteFile(configFile, agentopts.DefaultConfigFile(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs: "+err.Error())
		os.Exit(1)
	}
	base, err := manifests.KustomizeBase()
	if err == nil {
		err = os.MkdirAll(kustomizeDir, 0o755)
	}
	for name, b := range base {
		if err == nil {
			err = os.WriteFile(filepath.Join(kustomizeDir, name), b, 0o644)
		}
	}
	if err == nil {
		err = renderRights()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gendocs: "+err.Error())
		os.Exit(1)
	}
}

// renderRights puts the table of every write a node may make into
// docs/security.md.
func renderRights() error {
	b, err := os.ReadFile(rightsFile)
	if err != nil {
		return err
	}
	table, err := rights.ReadTable(b)
	if err != nil {
		return fmt.Errorf("%s: %w", rightsFile, err)
	}
	doc, err := os.ReadFile(securityDoc)
	if err != nil {
		return err
	}
	out, err := rights.Splice(string(doc), rights.Render(table))
	if err != nil {
		return fmt.Errorf("%s: %w", securityDoc, err)
	}
	return os.WriteFile(securityDoc, []byte(out), 0o644)
}

const (
	rightsFile  = "docs/security-rights.yaml"
	securityDoc = "docs/security.md"
)

// kustomizeDir is where the kustomize base goes, from the repository's top.
const kustomizeDir = "deploy/kustomize"
