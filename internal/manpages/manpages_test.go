package manpages

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The checked-in pages (docs/man) are what the code generates: run
// `make docs` after changing a command.
func TestManPagesAreCurrent(t *testing.T) {
	// Whoever builds them, the pages are the same (no builder's home in them).
	t.Setenv("HOME", t.TempDir())
	dir := t.TempDir()
	if err := Write(dir); err != nil {
		t.Fatal(err)
	}
	checkedIn := filepath.Join("..", "..", "docs", "man")
	generated, _ := filepath.Glob(filepath.Join(dir, "*.1"))
	if len(generated) < 10 {
		t.Fatalf("only %d pages generated", len(generated))
	}
	for _, g := range generated {
		want, _ := os.ReadFile(g)
		got, err := os.ReadFile(filepath.Join(checkedIn, filepath.Base(g)))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("docs/man/%s is missing or out of date: run make docs", filepath.Base(g))
		}
	}
	existing, _ := filepath.Glob(filepath.Join(checkedIn, "*.1"))
	if len(existing) != len(generated) {
		t.Errorf("docs/man has %d pages, the code %d: run make docs (and remove stale pages)", len(existing), len(generated))
	}
}
