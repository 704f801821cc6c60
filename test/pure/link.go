package pure

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// LinksNoMethodLookup links the command pkg as the packages are built
// (CGO_ENABLED=0, -trimpath: sharing their compiled packages) and fails t when the linker finds a function that looks
// a method up by a name it computes (text/template's field evaluation,
// reflect.Type.Method in a loop): Go's linker then keeps every exported
// method of every type, which made the binaries about twice as big and
// every agent about 10 MiB heavier in memory. It fails too when the
// binary reaches text/template's evaluation at all.
func LinksNoMethodLookup(t *testing.T, pkg string) {
	t.Helper()
	if testing.Short() {
		t.Skip("links " + pkg + "; run without -short")
	}
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-dumpdep", "-o", t.TempDir()+"/bin", pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%.2000s", err, out)
	}
	lines := strings.Split(string(out), "\n")
	if len(lines) < 10000 {
		t.Fatalf("the linker's dump has %d lines; the check would prove nothing", len(lines))
	}
	seen := map[string]bool{}
	for _, line := range lines {
		src, dst, ok := strings.Cut(line, " -> ")
		if !ok {
			continue
		}
		if fn, marked := strings.CutSuffix(src, " <ReflectMethod>"); marked && !seen[fn] {
			seen[fn] = true
			t.Errorf("%s reaches %s, which looks methods up by a computed name", pkg, fn)
		}
		if dst == "text/template.(*Template).execute" && !seen[dst] {
			seen[dst] = true
			t.Errorf("%s reaches text/template's evaluation (from %s)", pkg, src)
		}
	}
}
