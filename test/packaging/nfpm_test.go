package packaging

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/kustodian/kustodian/test/dist"
)

// The tests' packages are built by nfpm alone (make packages-host), a
// release's by goreleaser (make packages), from one definition: the nfpm
// the Makefile builds must be the one goreleaser's module requires, so
// that both read .goreleaser.yaml's nfpms alike.
func TestNfpmIsGoreleasersOwn(t *testing.T) {
	t.Parallel()
	mk, err := os.ReadFile(filepath.Join(dist.RepoRoot(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	version := func(name string) string {
		m := regexp.MustCompile(`(?m)^` + name + ` := (v\S+)$`).FindSubmatch(mk)
		if m == nil {
			t.Fatalf("Makefile: no %s", name)
		}
		return string(m[1])
	}
	goreleaser, nfpm := version("GORELEASER_VERSION"), version("NFPM_VERSION")
	out, err := exec.Command("go", "mod", "download", "-json", "github.com/goreleaser/goreleaser/v2@"+goreleaser).Output()
	if err != nil {
		t.Fatalf("go mod download goreleaser %s: %v\n%s", goreleaser, err, out)
	}
	var mod struct{ GoMod string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.GoMod == "" {
		t.Fatalf("go mod download -json: %v\n%s", err, out)
	}
	gomod, err := os.ReadFile(mod.GoMod)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*github\.com/goreleaser/nfpm/v2 (v\S+)`).FindSubmatch(gomod)
	if m == nil {
		t.Fatalf("goreleaser %s's go.mod requires no nfpm", goreleaser)
	}
	if string(m[1]) != nfpm {
		t.Errorf("goreleaser %s builds its packages with nfpm %s; the Makefile's NFPM_VERSION is %s", goreleaser, m[1], nfpm)
	}
}
