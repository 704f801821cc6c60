package docs

import (
	"os"
	"testing"

	"github.com/kustodian/kustodian/test/buildbin"
)

// TestMain removes the binaries the tests built once they are done.
func TestMain(m *testing.M) {
	code := m.Run()
	buildbin.Remove()
	os.Exit(code)
}
