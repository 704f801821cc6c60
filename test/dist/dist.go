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
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	matches, _ := filepath.Glob(filepath.Join(root, "dist", "kustodian_*_linux_amd64."+format))
	if len(matches) != 1 {
		t.Fatalf("want one dist/kustodian_*_linux_amd64.%s, found %v: run make packages", format, matches)
	}
	return matches[0]
}

// repoRoot is the nearest directory at or above the working directory with
// the .goreleaser.yaml.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, ".goreleaser.yaml")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", os.ErrNotExist
		}
		dir = parent
	}
}
