package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// kuredRow is a row of docs/kured.md's table of Kured's flags: its first
// cell, one or more of Kured's flags in backquotes.
var kuredRow = regexp.MustCompile("(?m)^\\| (`--[a-z-]+`(?:, `--[a-z-]+`)*) \\|")

// kuredTableFlags are the Kured flags docs/kured.md's table lists.
func kuredTableFlags(t *testing.T) map[string]bool {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(root(t), "docs", "kured.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range kuredRow.FindAllStringSubmatch(string(text), -1) {
		for _, f := range regexp.MustCompile("`(--[a-z-]+)`").FindAllStringSubmatch(m[1], -1) {
			out[f[1]] = true
		}
	}
	return out
}

// docs/kured.md's table names every flag of Kured's own binary (make kured
// builds it; KURED names it) with Kustodian's equivalent or why there is
// none, and names no flag Kured does not have.
func TestKuredFlagTableIsWhole(t *testing.T) {
	bin := os.Getenv("KURED")
	if bin == "" {
		t.Fatal("KURED is not set: make test-integration builds Kured's own binary (make kured) and sets it")
	}
	out, err := exec.Command(bin, "--help").CombinedOutput()
	kured := flags(string(out))
	if len(kured) < 30 {
		t.Fatalf("%s --help: %v; read %d flags from:\n%s", bin, err, len(kured), out)
	}
	delete(kured, "--help")
	delete(kured, "-h")
	table := kuredTableFlags(t)
	var missing, unknown []string
	for f := range kured {
		if !table[f] {
			missing = append(missing, f)
		}
	}
	for f := range table {
		if !kured[f] {
			unknown = append(unknown, f)
		}
	}
	sort.Strings(missing)
	sort.Strings(unknown)
	if len(missing) > 0 {
		t.Errorf("docs/kured.md's table lacks Kured's flags %s", strings.Join(missing, " "))
	}
	if len(unknown) > 0 {
		t.Errorf("docs/kured.md's table names %s, which Kured does not have", strings.Join(unknown, " "))
	}
}
