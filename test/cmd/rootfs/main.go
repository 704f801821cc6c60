// Command rootfs makes the end-to-end tests' root file system (a Debian
// tarball made with debootstrap, cached; see test/nspawn) and prints its
// path. make test runs it beside the unit tests, so that the download
// overlaps the compiling; the tests would make it themselves otherwise.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/kustodian/kustodian/test/nspawn"
)

func main() {
	tarball, err := nspawn.Tarball(context.Background(), os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rootfs:", err)
		os.Exit(1)
	}
	fmt.Println(tarball)
}
