package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/kustodian/kustodian/test/buildbin"
)

// One maintenance reboots when its script leaves the reboot sentinel,
// whichever way it was asked for: kustodian run, kustodian-ctl rollout
// create, and the two playbooks default alike, and ansible/README.md says
// so. (Seen: rollout create and rollout-cluster.yml never rebooted by
// default, kustodian run and rollout.yml did.)
func TestRebootDefaultsAgree(t *testing.T) {
	top := root(t)
	b := &binaries{dir: buildbin.Dir(t), help: map[string]string{}}
	defaultOf := regexp.MustCompile(`(?m)^\s+--reboot string\s.*\(default "([a-z]+)"\)`)
	found := map[string]string{}
	for _, args := range [][]string{{"kustodian", "run"}, {"kustodian-ctl", "rollout", "create"}} {
		m := defaultOf.FindStringSubmatch(b.helpOf(args...))
		if m == nil {
			t.Fatalf("%v --help gives no default for --reboot:\n%s", args, b.helpOf(args...))
		}
		found[args[0]+" "+args[len(args)-1]] = m[1]
	}
	read := func(rel string) string {
		text, err := os.ReadFile(filepath.Join(top, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(text)
	}
	// rollout.yml hands rollout_reboot to kustodian run with a default of
	// its own; rollout-cluster.yml passes --reboot only when it is set,
	// so its default is rollout create's.
	node := regexp.MustCompile(`rollout_reboot \| default\('([a-z]+)'\)`).FindAllStringSubmatch(read("ansible/tasks/rollout-node.yml"), -1)
	if len(node) == 0 {
		t.Fatal("ansible/tasks/rollout-node.yml: no default for rollout_reboot")
	}
	for i, m := range node {
		found["rollout.yml ("+string(rune('a'+i))+")"] = m[1]
	}
	if !regexp.MustCompile(`\['--reboot', rollout_reboot\] if rollout_reboot is defined else \[\]`).MatchString(read("ansible/rollout-cluster.yml")) {
		t.Error("ansible/rollout-cluster.yml no longer leaves --reboot to rollout create's default: state its default here")
	}
	readme := read("ansible/README.md")
	for i, m := range regexp.MustCompile("(?m)^\\| `rollout_reboot`[^|]*\\| `([a-z]+)`").FindAllStringSubmatch(readme, -1) {
		found["ansible/README.md (row "+string(rune('1'+i))+")"] = m[1]
	}
	want := found["kustodian run"]
	for _, got := range found {
		if got != want {
			t.Errorf("the reboot defaults differ: %v", found)
			break
		}
	}
	if len(found) < 6 {
		t.Errorf("read %d defaults, want 6 (two binaries, two in rollout-node.yml, two README rows): %v", len(found), found)
	}
}
