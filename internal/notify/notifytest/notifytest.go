// Package notifytest builds the kustodian-notify helper for the tests of
// packages whose code runs it (the agent finds it next to its own binary;
// a test binary has none).
package notifytest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Main builds the helper into a temporary directory, points notify at it
// through set, runs the tests and cleans up: a TestMain in one line.
func Main(run func() int, set func(path string)) {
	dir, err := os.MkdirTemp("", "kustodian-notify-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	path := filepath.Join(dir, "kustodian-notify")
	// Static and -trimpath, as the packages' binaries: a test run under
	// the race detector (with cgo) then shares the build with them.
	cmd := exec.Command("go", "build", "-trimpath", "-o", path, "github.com/kustodian/kustodian/cmd/kustodian-notify")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building kustodian-notify: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	set(path)
	code := run()
	os.RemoveAll(dir)
	os.Exit(code)
}
