package hostfiles

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRebootCheck(t *testing.T) {
	dir := t.TempDir()
	sentinel := filepath.Join(dir, "reboot-required")
	fakeNR := filepath.Join(dir, "needs-restarting")
	script := "#!/bin/sh\n[ \"$1\" = -r ] || exit 9\necho 'Core libraries or services have been updated since boot-up:'\necho '  * kernel'\necho '  * glibc'\necho\necho 'Reboot is required to fully utilize these updates.'\nexit 1\n"
	if err := os.WriteFile(fakeNR, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		check    RebootCheck
		files    map[string]string
		want     bool
		why, err string
	}{
		{name: "nothing", check: RebootCheck{Sentinel: sentinel}},
		{name: "sentinel alone", check: RebootCheck{Sentinel: sentinel}, files: map[string]string{"reboot-required": ""}, want: true, why: sentinel + " exists"},
		{name: "sentinel with its packages, repeats once", check: RebootCheck{Sentinel: sentinel},
			files: map[string]string{"reboot-required": "", "reboot-required.pkgs": "linux-image-6.1.0-27-amd64\nlibc6\nlinux-image-6.1.0-27-amd64\n"},
			want:  true, why: "packages linux-image-6.1.0-27-amd64, libc6"},
		{name: "many packages", check: RebootCheck{Sentinel: sentinel},
			files: map[string]string{"reboot-required": "", "reboot-required.pkgs": "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\n"},
			want:  true, why: "packages a, b, c, d, e, f, g, h, i, j and 2 more"},
		{name: "needs-restarting says so", check: RebootCheck{Sentinel: sentinel, NeedsRestarting: fakeNR}, want: true, why: "updated since boot: kernel, glibc"},
		{name: "needs-restarting says no", check: RebootCheck{Sentinel: sentinel, NeedsRestarting: "/bin/true"}},
		{name: "command yes", check: RebootCheck{Sentinel: sentinel, Command: "echo firmware update; exit 0"}, want: true, why: "rebootRequired.command says so: firmware update"},
		{name: "command no, sentinel ignored", check: RebootCheck{Sentinel: sentinel, Command: "exit 1"}, files: map[string]string{"reboot-required": ""}},
		{name: "command broken", check: RebootCheck{Command: "echo cannot tell; exit 3"}, err: "exited 3 (0: a reboot is needed, 1: none): cannot tell"},
		{name: "command too slow", check: RebootCheck{Command: "sleep 5", Timeout: 50_000_000}, err: "did not finish within 50ms"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, n := range []string{"reboot-required", "reboot-required.pkgs"} {
				_ = os.Remove(filepath.Join(dir, n))
			}
			for n, body := range c.files {
				if err := os.WriteFile(filepath.Join(dir, n), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, why, err := c.check.Required(context.Background())
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want one with %q", err, c.err)
				}
				return
			}
			if err != nil || got != c.want || why != c.why {
				t.Fatalf("Required() = %v, %q, %v; want %v, %q", got, why, err, c.want, c.why)
			}
		})
	}
}
