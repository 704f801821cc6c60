package agentopts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// Whatever the configuration file holds, loading it never panics, and a
// refusal is one line that names the file.
func FuzzConfigFile(f *testing.F) {
	for _, seed := range []string{
		"", "namespace: kustodian\n", "drain:\n  timeout: 5m\n", "drain:\n  timout: 5m\n", "drain: [a, b]\n",
		"queue:\n  heartbeat: [1s]\n", "kubeconfig: {a: b}\n", ":\n", "\t", "lock:\n  group: x\n", "drain:\n  force: maybe\n",
	} {
		f.Add(seed)
	}
	dir := f.TempDir()
	path := filepath.Join(dir, "config.yaml")
	f.Fuzz(func(t *testing.T, content string) {
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
		cf := AddFlags(fs)
		if err := fs.Parse([]string{"--config", path}); err != nil {
			t.Fatal(err)
		}
		_, err := cf.Load()
		if err == nil {
			return
		}
		if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, path) && !strings.HasPrefix(msg, "configuration:") {
			t.Fatalf("refusal of %q is not one line naming the file: %q", content, msg)
		}
	})
}
