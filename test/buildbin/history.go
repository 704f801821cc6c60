package buildbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// AtCommit builds the kustodian binary of an earlier commit of the
// repository at repo, from its git history (git archive, then go build in
// that tree with its own go.mod), into cache/<commit>/kustodian, where
// later runs find it. The binary says the commit as its version, so that
// `kustodian-ctl version` tells the agents apart. A shallow clone fetches
// its history first; a clone that still lacks the commit fails the test,
// saying what to fetch.
func AtCommit(t testing.TB, repo, commit, cache string) string {
	t.Helper()
	bin := filepath.Join(cache, commit, "kustodian")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	has := func() bool { return exec.Command("git", "-C", repo, "cat-file", "-e", commit+"^{commit}").Run() == nil }
	if !has() {
		// A shallow clone (as some CI systems make): fetch the history
		// from where it was cloned.
		if out, err := exec.Command("git", "-C", repo, "rev-parse", "--is-shallow-repository").Output(); err == nil && strings.TrimSpace(string(out)) == "true" {
			t.Logf("fetching the history of %s for commit %s", repo, commit[:12])
			if out, err := exec.Command("git", "-C", repo, "fetch", "--quiet", "--unshallow").CombinedOutput(); err != nil {
				t.Logf("git fetch --unshallow: %v %s", err, out)
			}
		}
		if !has() {
			t.Fatalf("commit %s is not in the history of %s: fetch it (git fetch --unshallow) or clone with history", commit, repo)
		}
	}
	src, err := os.MkdirTemp("", "kustodian-at-"+commit[:12]+"-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(src)
	archive := exec.Command("sh", "-c", `git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "sh", repo, commit, src)
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("unpacking commit %s: %v\n%s", commit, err, out)
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("building kustodian at commit %s from git history (once; cached in %s)", commit[:12], filepath.Dir(bin))
	tmp := bin + ".tmp"
	pkg := "github.com/kustodian/kustodian/internal/version"
	build := exec.Command("go", "build", "-trimpath", "-o", tmp,
		"-ldflags", fmt.Sprintf("-X %s.Version=%s -X %s.Commit=%s", pkg, "git-"+commit[:12], pkg, commit),
		"./cmd/kustodian")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=readonly")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build at commit %s: %v\n%s", commit, err, strings.TrimSpace(string(out)))
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}
