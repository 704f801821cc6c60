package version

import (
	"bytes"
	"strings"
	"testing"
)

func TestVersionCommand(t *testing.T) {
	old := Version
	Version = "v1.2.3"
	t.Cleanup(func() { Version = old })

	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "kustodian v1.2.3 (commit "},
		{[]string{"--short"}, "v1.2.3\n"},
	} {
		var out bytes.Buffer
		cmd := NewCommand("kustodian")
		cmd.SetOut(&out)
		cmd.SetArgs(tc.args)
		if err := cmd.Execute(); err != nil {
			t.Fatalf("version %v: %v", tc.args, err)
		}
		if !strings.HasPrefix(out.String(), tc.want) {
			t.Errorf("version %v printed %q, want prefix %q", tc.args, out.String(), tc.want)
		}
	}
}

func TestVersionRejectsArguments(t *testing.T) {
	cmd := NewCommand("kustodian")
	cmd.SetArgs([]string{"extra"})
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.Execute(); err == nil {
		t.Fatal("version accepted an argument")
	}
}
