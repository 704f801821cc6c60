// Package dist finds the packages `make packages` built into dist/ for the
// tests that install them.
package dist

import (
	"os"
	"path/filepath"
	"testing"
)

// The two packages one build makes.
const (
	Agent = "kustodian"     // the node's agent, its units and configuration
	Ctl   = "kustodian-ctl" // the admin's CLI
)

// Package is the absolute path of the amd64 package name (Agent, Ctl) of
// format ("deb", "rpm") in the repository's dist/. A missing one fails the
// test: make test builds the packages first.
func Package(t testing.TB, name, format string) string {
	t.Helper()
	pattern := name + "_*_linux_amd64." + format
	matches, _ := filepath.Glob(filepath.Join(RepoRoot(t), "dist", pattern))
	if len(matches) != 1 {
		t.Fatalf("want one dist/%s, found %v: run make packages-host", pattern, matches)
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
