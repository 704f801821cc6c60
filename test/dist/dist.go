// Package dist finds the packages `make packages` built into dist/ for the
// tests that install them.
package dist

import (
	"os"
	"path/filepath"
	"testing"
)

// Package is the absolute path of the amd64 package of format ("deb",
// "rpm") in the repository's dist/. A missing one fails the test: make test
// builds the packages first.
func Package(t testing.TB, format string) string {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(RepoRoot(t), "dist", "kustodian_*_linux_amd64."+format))
	if len(matches) != 1 {
		t.Fatalf("want one dist/kustodian_*_linux_amd64.%s, found %v: run make packages", format, matches)
	}
	return matches[0]
}

// RepoRoot is the repository's root: the nearest directory at or above
// the working directory with the .goreleaser.yaml.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, ".goreleaser.yaml")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no .goreleaser.yaml above the working directory: not in the repository")
		}
		dir = parent
	}
}
