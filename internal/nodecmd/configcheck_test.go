package nodecmd

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigCheck(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config.yaml")
	check := func(file string) (string, error) {
		t.Helper()
		if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		cmd := NewRoot()
		cmd.SetOut(&out)
		cmd.SetArgs([]string{"config", "check", path})
		err := cmd.Execute()
		return out.String(), err
	}
	t.Setenv("KUSTODIAN_DRAIN_TIMEOUT", "soon") // not read: the file alone is checked
	out, err := check("namespace: kube-maint\ndrain:\n  timeout: 10m\n")
	if err != nil || out != path+": OK\n" {
		t.Fatalf("a good file: %v, %q", err, out)
	}
	out, err = check("namespce: x\ndrain:\n  timeout: 5 minutes\n  onTimeout: panic\nqueue:\n  heartbeat: 1ms\nstateDir: /nonexistent/kustodian\n")
	if !errors.Is(err, ErrSilentExit1) {
		t.Errorf("exit: %v, want 1", err)
	}
	for _, want := range []string{
		`error: ` + path + `: unknown key "namespce"; did you mean namespace?`,
		`error: ` + path + `: drain.timeout: "5 minutes" is not a duration`,
		`error: ` + path + `: drain.onTimeout: "panic" is not one of hold, release`,
		`error: ` + path + `: queue.heartbeat: must be at least 100ms, got 1ms`,
		`error: ` + path + `: stateDir: /nonexistent/kustodian cannot be used`,
		path + `: 5 problem(s); the agent would refuse this configuration`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output\n%s\nlacks %q", out, want)
		}
	}
}
