package hostfiles

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/kustodian/kustodian/internal/hostcmd"
)

// RebootCheck says whether the host needs a reboot, the way its
// distribution says it: Debian and Ubuntu leave Sentinel (and list the
// packages that want it in Sentinel.pkgs); the RHEL family's
// `needs-restarting -r` exits 1; or an operator's Command exits 0 (as
// Kured's --reboot-sentinel-command).
type RebootCheck struct {
	// Sentinel is the file whose presence says a reboot is needed.
	Sentinel string
	// Command, run with /bin/sh -c, exits 0 when a reboot is needed and 1
	// when not; "" asks the sentinel and NeedsRestarting instead.
	Command string
	// NeedsRestarting is the path of needs-restarting ("": none here);
	// asked only without Command, when the sentinel is absent.
	NeedsRestarting string
	// Timeout bounds the command (default 30 s).
	Timeout time.Duration
}

// NeedsRestartingPath is where the RHEL family's dnf-utils puts it.
const NeedsRestartingPath = "/usr/bin/needs-restarting"

// FindNeedsRestarting is NeedsRestartingPath when it exists, else "".
func FindNeedsRestarting() string {
	if _, err := os.Stat(NeedsRestartingPath); err == nil {
		return NeedsRestartingPath
	}
	return ""
}

// Required reports whether the host needs a reboot and why, in words for a
// request's reason ("packages linux-image-6.1.0-27-amd64, libc6"). A command
// that cannot be run or exits otherwise than 0 or 1 is an error: nothing
// can be said.
func (c RebootCheck) Required(ctx context.Context) (bool, string, error) {
	if c.Command != "" {
		out, code, err := c.run(ctx, "/bin/sh", "-c", c.Command)
		switch {
		case err != nil:
			return false, "", fmt.Errorf("rebootRequired.command %q: %w", c.Command, err)
		case code == 0:
			why := "rebootRequired.command says so"
			if line := hostcmd.LastLine(out); line != "" {
				why += ": " + line
			}
			return true, why, nil
		case code == 1:
			return false, "", nil
		}
		return false, "", fmt.Errorf("rebootRequired.command %q exited %d (0: a reboot is needed, 1: none): %s", c.Command, code, hostcmd.LastLine(out))
	}
	if c.Sentinel != "" {
		pending, err := exists(c.Sentinel)
		if err != nil {
			return false, "", err
		}
		if pending {
			return true, sentinelReason(c.Sentinel), nil
		}
	}
	if c.NeedsRestarting == "" {
		return false, "", nil
	}
	out, code, err := c.run(ctx, c.NeedsRestarting, "-r")
	switch {
	case err != nil:
		return false, "", fmt.Errorf("%s -r: %w", c.NeedsRestarting, err)
	case code == 0:
		return false, "", nil
	case code == 1:
		why := "needs-restarting -r says so"
		if items := bulletItems(out); len(items) > 0 {
			why = "updated since boot: " + strings.Join(items, ", ")
		}
		return true, why, nil
	}
	return false, "", fmt.Errorf("%s -r exited %d: %s", c.NeedsRestarting, code, hostcmd.LastLine(out))
}

// run runs a command with the check's timeout; code is its exit code.
func (c RebootCheck) run(ctx context.Context, name string, args ...string) (string, int, error) {
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	return hostcmd.Run(ctx, timeout, name, args...)
}

// maxPackages bounds the packages a reason names.
const maxPackages = 10

// sentinelReason names the packages of Sentinel.pkgs (Debian's
// update-notifier writes one per line, repeats included).
func sentinelReason(sentinel string) string {
	b, err := os.ReadFile(sentinel + ".pkgs")
	if err != nil {
		return sentinel + " exists"
	}
	var pkgs []string
	seen := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if p := strings.TrimSpace(line); p != "" && !seen[p] {
			seen[p] = true
			pkgs = append(pkgs, p)
		}
	}
	if len(pkgs) == 0 {
		return sentinel + " exists"
	}
	if len(pkgs) > maxPackages {
		return fmt.Sprintf("packages %s and %d more", strings.Join(pkgs[:maxPackages], ", "), len(pkgs)-maxPackages)
	}
	return "packages " + strings.Join(pkgs, ", ")
}

// bulletItems are needs-restarting's "  * kernel" lines.
func bulletItems(out string) []string {
	var items []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if item, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "* "); ok && len(items) < maxPackages {
			items = append(items, strings.TrimSpace(item))
		}
	}
	return items
}
