package hostfiles

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/fsnotify/fsnotify"
)

// Watch reports, by a value on the returned channel, every change to one of
// the files (created, written, removed, renamed). Several changes may
// collapse into one value: the receiver re-reads the files anyway. Watching
// the directories, not the files, sees files that do not exist yet.
func (f Files) Watch(ctx context.Context) (<-chan struct{}, error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watching the maintenance files: %w", err)
	}
	names := map[string]bool{}
	dirs := map[string]bool{}
	for _, p := range []string{f.Request, f.InProgress, f.RebootSentinel} {
		if p == "" {
			continue
		}
		names[filepath.Clean(p)] = true
		dir := filepath.Dir(p)
		if dirs[dir] {
			continue
		}
		if err := w.Add(dir); err != nil {
			if p == f.RebootSentinel {
				continue // its directory may not exist; the resync still reads it
			}
			w.Close()
			return nil, fmt.Errorf("watching %s: %w", dir, err)
		}
		dirs[dir] = true
	}
	changed := make(chan struct{}, 1)
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
				if names[filepath.Clean(ev.Name)] {
					select {
					case changed <- struct{}{}:
					default: // one pending notice is enough
					}
				}
			case _, ok := <-w.Errors:
				if !ok {
					return
				}
				// An overflow loses events; tell the receiver to re-read.
				select {
				case changed <- struct{}{}:
				default:
				}
			}
		}
	}()
	return changed, nil
}
