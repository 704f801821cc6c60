package hostwatch

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kustodian/kustodian/internal/hostfiles"
)

func TestWatch(t *testing.T) {
	dir := t.TempDir()
	f := hostfiles.Files{
		Request:        filepath.Join(dir, "maintenance-required"),
		InProgress:     filepath.Join(dir, "maintenance-in-progress"),
		RebootSentinel: filepath.Join(dir, "no-such-dir", "reboot-required"),
	}
	changed, err := Files(t.Context(), f)
	if err != nil {
		t.Fatal(err)
	}
	expect := func(what string) {
		t.Helper()
		select {
		case <-changed:
		case <-time.After(10 * time.Second):
			t.Fatalf("no change reported after %s", what)
		}
	}
	os.WriteFile(filepath.Join(filepath.Dir(f.Request), "unrelated"), nil, 0o644)
	os.WriteFile(f.Request, nil, 0o644)
	expect("creating the request")
	os.Remove(f.Request)
	expect("removing the request")
}
