package patch

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// put writes files below root.
func put(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for rel, text := range files {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Taken over, unattended-upgrades and dnf-automatic no longer install by
// themselves, as apt's own apt-config reads the files; undone, they do
// again; a second takeover changes nothing.
func TestTakeoverStopsTheHostsOwnInstalls(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	put(t, root, map[string]string{
		"usr/bin/unattended-upgrade":                                     "",
		"etc/systemd/system/timers.target.wants/apt-daily-upgrade.timer": "",
		"etc/apt/apt.conf.d/20auto-upgrades":                             "APT::Periodic::Update-Package-Lists \"1\";\nAPT::Periodic::Unattended-Upgrade \"1\";\n",
		"usr/bin/dnf-automatic":                                          "",
		"etc/systemd/system/timers.target.wants/dnf-automatic.timer":     "",
		"etc/dnf/automatic.conf":                                         "[commands]\nupgrade_type = default\ndownload_updates = yes\napply_updates = yes\n",
	})
	// apt-config as the host has it, reading the test's root.
	conf := filepath.Join(root, "apt.conf")
	put(t, root, map[string]string{"apt.conf": "Dir::Etc::Parts \"" + filepath.Join(root, "etc/apt/apt.conf.d") + "\";\nDir::Etc::main \"" + filepath.Join(root, "etc/apt/apt.conf") + "\";\n"})
	run := func(ctx context.Context, env []string, name string, args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = append(os.Environ(), append(env, "APT_CONFIG="+conf)...)
		return cmd.Output()
	}
	self := func() string {
		t.Helper()
		s, err := SelfUpdates(ctx, root, run)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := self(); !strings.Contains(s, "unattended-upgrades") || !strings.Contains(s, "dnf-automatic.timer, apply_updates") {
		t.Fatalf("before the takeover: %q, want both updaters named", s)
	}
	did, err := Takeover(root, false)
	if err != nil || len(did) != 3 {
		t.Fatalf("takeover: %v, did %q", err, did)
	}
	if s := self(); s != "" {
		t.Errorf("after the takeover: %q installs by itself, want nothing", s)
	}
	if did, err := Takeover(root, false); err != nil || len(did) != 0 {
		t.Errorf("a second takeover: %v, did %q; want nothing changed", err, did)
	}
	// dnf-automatic's install timer, enabled later, is masked already.
	put(t, root, map[string]string{"etc/systemd/system/timers.target.wants/dnf-automatic-install.timer": ""})
	if s := self(); s != "" {
		t.Errorf("the install timer enabled after the takeover: %q, want it masked", s)
	}
	if did, err := Takeover(root, true); err != nil || len(did) != 3 {
		t.Fatalf("undo: %v, did %q", err, did)
	}
	if s := self(); !strings.Contains(s, "unattended-upgrades") || !strings.Contains(s, "dnf-automatic-install.timer") {
		t.Errorf("after the undo: %q, want both updaters named again", s)
	}
}
