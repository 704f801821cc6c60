// Package atomicfile writes files whole or not at all: a temporary file in
// the same directory, synced, renamed into place, and the directory synced,
// so neither a reader nor a crash ever sees half a file.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces path with data, with the given mode, durably.
func Write(path string, data []byte, mode os.FileMode) error { return write(path, data, mode, true) }

// Replace replaces path with data like Write, whole for every reader, but
// without syncing: after a power cut the file may hold what it held
// before, or nothing. For data that is cheap to lose and often written.
func Replace(path string, data []byte, mode os.FileMode) error {
	return write(path, data, mode, false)
}

func write(path string, data []byte, mode os.FileMode, durable bool) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	steps := []func() error{
		func() error { return tmp.Chmod(mode) },
		func() error { _, err := tmp.Write(data); return err },
	}
	if durable {
		steps = append(steps, tmp.Sync)
	}
	for _, step := range steps {
		if err := step(); err != nil {
			tmp.Close()
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if !durable {
		return nil
	}
	return SyncDir(dir)
}

// SyncDir makes a directory's entries (a rename, a removal) durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("syncing %s: %w", dir, err)
	}
	return nil
}
