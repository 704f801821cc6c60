// Package hostwatch reports changes to the host files of the maintenance
// protocol (package hostfiles) and to the managed jobs' directory, through
// inotify.
package hostwatch

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/fsnotify/fsnotify"

	"github.com/kustodian/kustodian/internal/hostfiles"
)

// Files reports, by a value on the returned channel, every change to one of
// the files (created, written, removed, renamed). Several changes may
// collapse into one value: the receiver re-reads the files anyway. Watching
// the directories, not the files, sees files that do not exist yet.
func Files(ctx context.Context, f hostfiles.Files) (<-chan struct{}, error) {
	names := map[string]bool{}
	var dirs []string
	for _, p := range []string{f.Request, f.InProgress, f.RebootSentinel} {
		if p == "" {
			continue
		}
		names[filepath.Clean(p)] = true
		dirs = append(dirs, filepath.Dir(p))
	}
	// The sentinel's directory may not exist; the resync still reads it.
	optional := map[string]bool{}
	if f.RebootSentinel != "" {
		optional[filepath.Dir(f.RebootSentinel)] = true
	}
	return watch(ctx, dirs, optional, func(name string) bool { return names[filepath.Clean(name)] })
}

// Dir reports every change in a directory, as Files does for the files.
func Dir(ctx context.Context, dir string) (<-chan struct{}, error) {
	return watch(ctx, []string{dir}, nil, func(string) bool { return true })
}

func watch(ctx context.Context, dirs []string, optional map[string]bool, match func(string) bool) (<-chan struct{}, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watching files: %w", err)
	}
	added := map[string]bool{}
	for _, dir := range dirs {
		if added[dir] {
			continue
		}
		if err := w.Add(dir); err != nil {
			if optional[dir] {
				continue
			}
			w.Close()
			return nil, fmt.Errorf("watching %s: %w", dir, err)
		}
		added[dir] = true
	}
	changed := make(chan struct{}, 1)
	notify := func() {
		select {
		case changed <- struct{}{}:
		default: // one pending notice is enough
		}
	}
	go func() {
		defer w.Close()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if match(ev.Name) {
					notify()
				}
			case _, ok := <-w.Errors:
				if !ok {
					return
				}
				notify() // an overflow loses events: re-read
			}
		}
	}()
	return changed, nil
}
