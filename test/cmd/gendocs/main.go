// Command gendocs writes the man pages of kustodian and kustodian-ctl from
// their cobra command trees, and the packages' default configuration file:
// `make docs`. Both are checked in, and tests fail when they differ from
// what the code generates.
package main

import (
	"fmt"
	"os"

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
}
