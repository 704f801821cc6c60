package nspawn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/kustodian/kustodian/test/cluster"
)

// cacheDir is where the root file system tarball is kept.
func cacheDir() string { return filepath.Join(cluster.CacheRoot(), "rootfs") }

// Tarball returns the cached root file system, making it with debootstrap
// when missing (minutes, once per machine). Progress goes to log.
func Tarball(ctx context.Context, log io.Writer) (string, error) {
	dir := cacheDir()
	tarball := filepath.Join(dir, fmt.Sprintf("%s-%s-v%s.tar", Suite, strings.Join(Packages, "+"), imageVersion))
	if _, err := os.Stat(tarball); err == nil {
		return tarball, nil
	}
	for _, tool := range []string{"debootstrap", "systemd-nspawn", "nsenter", "tar"} {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("%s is not installed; install debootstrap and systemd-container (make deps does)", tool)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// One build at a time, across test processes.
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", err
	}
	if _, err := os.Stat(tarball); err == nil {
		return tarball, nil // built meanwhile
	}
	root, err := os.MkdirTemp(dir, ".root-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(root)
	fmt.Fprintf(log, "building a %s root file system with debootstrap (once; minutes)\n", Suite)
	cmd := exec.CommandContext(ctx, "debootstrap", "--variant=minbase", "--include="+strings.Join(Packages, ","), Suite, root, "http://deb.debian.org/debian")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("debootstrap %s failed (%v): %s", Suite, err, lastLines(out.String(), 3))
	}
	if err := prepareRoot(root); err != nil {
		return "", err
	}
	tmp := tarball + ".tmp"
	if out, err := exec.CommandContext(ctx, "tar", "-C", root, "-cf", tmp, ".").CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("tar of the root file system: %v: %s", err, out)
	}
	return tarball, os.Rename(tmp, tarball) // whole, or not at all
}

// prepareRoot makes the image boot quietly inside nspawn.
func prepareRoot(root string) error {
	// MkdirTemp made it 0700: services that drop root could not even reach /.
	if err := os.Chmod(root, 0o755); err != nil {
		return err
	}
	// No getty on the console, no waiting for a network configuration that
	// the shared host network never reports.
	for _, unit := range []string{"console-getty.service", "getty@tty1.service", "systemd-networkd-wait-online.service"} {
		link := filepath.Join(root, "etc/systemd/system", unit)
		_ = os.Remove(link)
		if err := os.Symlink("/dev/null", link); err != nil {
			return err
		}
	}
	// No sshd unless a test asks for one (EnableSSH): the hosts share the
	// machine's network, so they cannot all listen on port 22.
	for _, link := range []string{"etc/systemd/system/multi-user.target.wants/ssh.service", "etc/systemd/system/sshd.service"} {
		if err := os.Remove(filepath.Join(root, link)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	// A persistent journal, so that a test can read what happened before a
	// reboot.
	if err := os.MkdirAll(filepath.Join(root, "var/log/journal"), 0o2755); err != nil {
		return err
	}
	// A fixed machine ID: journalctl -D finds the journal of every boot in
	// one directory (each host is its own copy anyway).
	return os.WriteFile(filepath.Join(root, "etc/machine-id"), []byte("6b7573746f6469616e2d746573743031\n"), 0o444)
}
