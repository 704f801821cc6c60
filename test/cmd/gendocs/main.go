// Command gendocs writes the man pages of kustodian and kustodian-ctl from
// their cobra command trees, the packages' default configuration file, and
// the cluster side as a kustomize base (deploy/kustomize): `make docs`. All
// are checked in, and tests fail when they differ from what the code
// generates.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/kustodian/kustodian/internal/manifests"
	"github.com/kustodian/kustodian/internal/manpages"
	"github.com/kustodian/kustodian/internal/nodecmd"
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
	if err := os.WriteFile(configFile, nodecmd.DefaultConfigFile(), 0o644); err != nil {
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
	if err != nil {
		fmt.Fprintln(os.Stderr, "gendocs: "+err.Error())
		os.Exit(1)
	}
}

// kustomizeDir is where the kustomize base goes, from the repository's top.
const kustomizeDir = "deploy/kustomize"
