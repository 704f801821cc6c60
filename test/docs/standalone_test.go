// Package docs checks the repository's documents against the repository:
// a user has the repository alone.
package docs

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository's top directory.
func root(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// outside are the ways a file was seen to point at documents the
// repository does not have: the design notes the project started from.
var outside = regexp.MustCompile(`\.\./shared|DESIGN(\.md| sections? [0-9])`)

// No file in the repository points outside it.
func TestNothingPointsOutsideTheRepository(t *testing.T) {
	top := root(t)
	self, err := filepath.Abs("standalone_test.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir(top, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "build", "dist", "bin", "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || path == self {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.IndexByte(b, 0) >= 0 { // not text
			return nil
		}
		checked++
		for i, line := range strings.Split(string(b), "\n") {
			if outside.MatchString(line) {
				rel, _ := filepath.Rel(top, path)
				t.Errorf("%s:%d points outside the repository: %s", rel, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d files checked: the walk missed the repository", checked)
	}
}
