package patch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/kustodian/kustodian/internal/atomicfile"
)

// Taking over the host's own updaters: unattended-upgrades (apt) and
// dnf-automatic (dnf) install updates by themselves, on every node within
// the same hour. Taken over, they still download updates (so that a
// campaign's install is quick), and only patch campaigns install, through
// the queue.

// The files a takeover writes, below the host's root.
const (
	// AptTakeover turns unattended-upgrades' install step off; apt reads
	// apt.conf.d in order, so this file comes after 20auto-upgrades and
	// 50unattended-upgrades.
	AptTakeover = "etc/apt/apt.conf.d/51kustodian-no-unattended-install"
	// DnfTakeover makes dnf-automatic's service download only.
	DnfTakeover = "etc/systemd/system/dnf-automatic.service.d/50-kustodian-download-only.conf"
	// DnfInstallTimer is the timer of dnf-automatic that installs, masked.
	DnfInstallTimer = "etc/systemd/system/dnf-automatic-install.timer"
)

const aptTakeoverText = `// Written by kustodian patch takeover: package updates are installed by
// Kustodian's patch campaigns, through the maintenance queue, not by
// unattended-upgrades on every node at once (its downloads go on).
// kustodian patch takeover --undo removes this file.
APT::Periodic::Unattended-Upgrade "0";
`

const dnfTakeoverText = `# Written by kustodian patch takeover: package updates are installed by
# Kustodian's patch campaigns, through the maintenance queue; dnf-automatic
# downloads them only. kustodian patch takeover --undo removes this file.
[Service]
ExecStart=
ExecStart=/usr/bin/dnf-automatic /etc/dnf/automatic.conf --timer --downloadupdates --no-installupdates
`

// Takeover makes the host's own updaters (below root, "/" for the host)
// download only, or undoes it, and says what it changed. A takeover made
// already changes nothing.
func Takeover(root string, undo bool) ([]string, error) {
	var did []string
	write := func(rel, text string) error {
		p := filepath.Join(root, rel)
		if b, err := os.ReadFile(p); err == nil && string(b) == text {
			return nil
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := atomicfile.Write(p, []byte(text), 0o644); err != nil {
			return err
		}
		did = append(did, "wrote "+p)
		return nil
	}
	remove := func(rel string) error {
		p := filepath.Join(root, rel)
		err := os.Remove(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return err
		}
		did = append(did, "removed "+p)
		return nil
	}
	mask := func(rel string) error {
		p := filepath.Join(root, rel)
		if t, err := os.Readlink(p); err == nil && t == "/dev/null" {
			return nil
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.Symlink("/dev/null", p); err != nil {
			return fmt.Errorf("masking %s: %w (a unit of that name is there: remove it or systemctl mask it)", p, err)
		}
		did = append(did, "masked "+p)
		return nil
	}
	unmask := func(rel string) error {
		p := filepath.Join(root, rel)
		if t, err := os.Readlink(p); err != nil || t != "/dev/null" {
			return nil // not a mask of ours
		}
		return remove(rel)
	}
	var err error
	if undo {
		err = errors.Join(remove(AptTakeover), remove(DnfTakeover), unmask(DnfInstallTimer))
	} else {
		err = errors.Join(write(AptTakeover, aptTakeoverText), write(DnfTakeover, dnfTakeoverText), mask(DnfInstallTimer))
	}
	return did, err
}

// SelfUpdates says what installs updates on this host (below root) by
// itself, outside the queue ("" when nothing does): unattended-upgrades
// with its timer on and its install step on (apt-config's
// APT::Periodic::Unattended-Upgrade, which run asks), or dnf-automatic
// with a timer on that installs (dnf-automatic-install.timer, or
// dnf-automatic.timer with apply_updates and without the takeover's
// drop-in).
func SelfUpdates(ctx context.Context, root string, run Runner) (string, error) {
	wants := func(unit string) bool {
		_, err := os.Lstat(filepath.Join(root, "etc/systemd/system/timers.target.wants", unit))
		return err == nil
	}
	var found []string
	if _, err := os.Stat(filepath.Join(root, "usr/bin/unattended-upgrade")); err == nil && wants("apt-daily-upgrade.timer") {
		out, err := run(ctx, nil, "apt-config", "shell", "V", "APT::Periodic::Unattended-Upgrade")
		if err != nil {
			return "", err
		}
		v := strings.Trim(strings.TrimPrefix(strings.TrimSpace(string(out)), "V="), "'")
		if v != "" && v != "0" {
			found = append(found, fmt.Sprintf("unattended-upgrades (APT::Periodic::Unattended-Upgrade %q)", v))
		}
	}
	if _, err := os.Stat(filepath.Join(root, "usr/bin/dnf-automatic")); err == nil {
		masked := false
		if t, err := os.Readlink(filepath.Join(root, DnfInstallTimer)); err == nil && t == "/dev/null" {
			masked = true
		}
		_, dropIn := os.Stat(filepath.Join(root, DnfTakeover))
		switch {
		case wants("dnf-automatic-install.timer") && !masked:
			found = append(found, "dnf-automatic (dnf-automatic-install.timer)")
		case wants("dnf-automatic.timer") && dropIn != nil && appliesUpdates(filepath.Join(root, "etc/dnf/automatic.conf")):
			found = append(found, "dnf-automatic (dnf-automatic.timer, apply_updates = yes)")
		}
	}
	return strings.Join(found, " and "), nil
}

// appliesUpdates says whether dnf-automatic's configuration installs the
// updates it downloads (apply_updates = yes/true/1).
func appliesUpdates(conf string) bool {
	b, err := os.ReadFile(conf)
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if ok && strings.TrimSpace(k) == "apply_updates" {
			switch strings.ToLower(strings.TrimSpace(v)) {
			case "yes", "true", "1", "on":
				return true
			}
			return false
		}
	}
	return false
}
