// Command gendocs writes the man pages of kustodian and kustodian-ctl from
// their cobra command trees: `make docs`. The pages are checked in, and
// internal/ctl's and internal/nodecmd's tests fail when they differ from
// what the code generates.
package main

import (
	"fmt"
	"os"

	"github.com/kustodian/kustodian/internal/manpages"
)

func main() {
	dir := "docs/man"
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	if err := manpages.Write(dir); err != nil {
		fmt.Fprintln(os.Stderr, "gendocs: "+err.Error())
		os.Exit(1)
	}
}
