// Package pure checks, for a package's unit tests, that its decision code
// stays a pure function of what it is given: neither the package nor the
// files that decide may reach the API server, the host's files, processes
// or network.
package pure

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Host are the imports that reach the host: files, processes, network.
var Host = []string{"os", "os/exec", "io/fs", "io/ioutil", "net", "net/http", "syscall", "path/filepath"}

// Cluster are the dependencies that reach the API server, a bus or a
// file watch.
var Cluster = []string{"k8s.io/client-go", "github.com/fsnotify/fsnotify", "github.com/godbus/dbus", "github.com/coreos/go-systemd"}

// Deps fails t when package pkg depends, at any depth, on one of banned.
func Deps(t *testing.T, pkg string, banned []string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 5 {
		t.Fatalf("go list found only %d dependencies of %s; the check would prove nothing", len(deps), pkg)
	}
	for _, dep := range deps {
		for _, b := range banned {
			if dep == b || strings.HasPrefix(dep, b+"/") {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
}

// Files fails t when one of the files (in the test's package directory)
// imports one of banned.
func Files(t *testing.T, files []string, banned []string) {
	t.Helper()
	for _, f := range files {
		parsed, err := parser.ParseFile(token.NewFileSet(), filepath.Clean(f), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, imp := range parsed.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatalf("%s: import %s: %v", f, imp.Path.Value, err)
			}
			for _, b := range banned {
				if path == b || strings.HasPrefix(path, b+"/") {
					t.Errorf("%s, which decides, imports %s", f, path)
				}
			}
		}
	}
}
