// Package buildbin builds Kustodian's binaries once per test process, static
// as they ship, for tests that run them as processes or copy them into hosts.
package buildbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	once sync.Once
	dir  string
	err  error
)

// Dir returns the directory holding kustodian, kustodian-ctl and
// kustodian-notify (the agent's notification helper, found next to it).
func Dir(t testing.TB) string {
	t.Helper()
	once.Do(func() {
		dir, err = os.MkdirTemp("", "kustodian-test-bin-")
		if err != nil {
			return
		}
		cmd := exec.Command("go", "build", "-trimpath", "-o", dir+string(filepath.Separator),
			"github.com/kustodian/kustodian/cmd/kustodian", "github.com/kustodian/kustodian/cmd/kustodian-ctl",
			"github.com/kustodian/kustodian/cmd/kustodian-notify")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, berr := cmd.CombinedOutput(); berr != nil {
			err = fmt.Errorf("go build: %v\n%s", berr, out)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// Remove deletes the directory Dir made (141 MB a test process): the test
// binaries' TestMain calls it once their tests are done.
func Remove() {
	if dir != "" {
		_ = os.RemoveAll(dir)
	}
}

// Kustodian and Ctl are the binaries' paths.
func Kustodian(t testing.TB) string { return filepath.Join(Dir(t), "kustodian") }
func Ctl(t testing.TB) string       { return filepath.Join(Dir(t), "kustodian-ctl") }
