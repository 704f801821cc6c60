// Package follow keeps a test's recorder of API objects whole: it lists,
// then watches from the list's resource version, opens the watch again
// whenever the API server closes it, and lists again when the server no
// longer has the history asked for (410 Gone: an API server restarted with
// its watch cache starts a new history). Such a gap is reported, and the
// objects that changed in it are handed over as one change each: a
// recorder sees every state the API server kept, and knows where it may
// have missed one.
package follow

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// Source is what to follow.
type Source struct {
	What  string // for messages: "the Leases of ns"
	List  func(context.Context, metav1.ListOptions) (runtime.Object, error)
	Watch func(context.Context, metav1.ListOptions) (watch.Interface, error)
}

// Event is a change of an object, as a watch event or as a list showed it.
type Event struct {
	Type   watch.EventType
	Object runtime.Object
	// Listed: the change was seen in a list (the first one, or after a
	// gap), not as it happened: an Added object was not necessarily
	// created at its resource version.
	Listed bool
}

// Handlers receive what happens.
type Handlers struct {
	// Observe gets every object listed (Added the first time, Added,
	// Modified or Deleted after a gap) and every watch event but
	// bookmarks.
	Observe func(Event)
	// Gap is told that the history was lost after resource version from
	// and listed again at to.
	Gap func(from, to string)
	// Fail is told why the history cannot go on; nothing follows it.
	Fail func(error)
}

// Start lists src once (an error is returned) and follows it in the
// background until ctx ends.
func Start(ctx context.Context, src Source, h Handlers) error {
	known := map[string]runtime.Object{}
	rv, err := relist(ctx, src, h, known, true)
	if err != nil {
		return err
	}
	go func() {
		for {
			last, err := watchFrom(ctx, src, h, known, rv)
			if ctx.Err() != nil {
				return
			}
			if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
				h.Fail(err)
				return
			}
			rv, err = relist(ctx, src, h, known, false)
			if err != nil {
				if ctx.Err() == nil {
					h.Fail(err)
				}
				return
			}
			if h.Gap != nil {
				h.Gap(last, rv)
			}
		}
	}()
	return nil
}

func key(obj runtime.Object) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return m.GetNamespace() + "/" + m.GetName()
}

// relist lists src and hands over what changed since known, which it
// updates; it returns the list's resource version.
func relist(ctx context.Context, src Source, h Handlers, known map[string]runtime.Object, first bool) (string, error) {
	obj, err := src.List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("listing %s: %w", src.What, err)
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		return "", fmt.Errorf("listing %s: %w", src.What, err)
	}
	seen := map[string]bool{}
	for _, it := range items {
		k := key(it)
		seen[k] = true
		typ := watch.Modified
		if first {
			typ = watch.Added
		} else if old, ok := known[k]; ok && resourceVersion(old) == resourceVersion(it) {
			continue // unchanged in the gap
		} else if !ok {
			typ = watch.Added
		}
		known[k] = it
		h.Observe(Event{Type: typ, Object: it, Listed: true})
	}
	for k, old := range known {
		if !seen[k] {
			delete(known, k)
			h.Observe(Event{Type: watch.Deleted, Object: old, Listed: true})
		}
	}
	l, err := meta.ListAccessor(obj)
	if err != nil {
		return "", fmt.Errorf("listing %s: %w", src.What, err)
	}
	return l.GetResourceVersion(), nil
}

func resourceVersion(obj runtime.Object) string {
	m, err := meta.Accessor(obj)
	if err != nil {
		return ""
	}
	return m.GetResourceVersion()
}

// watchFrom follows src from rv until the history breaks; it returns the
// last resource version seen and why it stopped.
func watchFrom(ctx context.Context, src Source, h Handlers, known map[string]runtime.Object, rv string) (string, error) {
	w, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{WatchFuncWithContext: src.Watch})
	if err != nil {
		return rv, fmt.Errorf("watching %s: %w", src.What, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return rv, ctx.Err()
		case ev, ok := <-w.ResultChan():
			if !ok {
				return rv, fmt.Errorf("the watch of %s ended before the run did", src.What)
			}
			switch ev.Type {
			case watch.Error:
				err := apierrors.FromObject(ev.Object)
				if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
					return rv, err
				}
				return rv, fmt.Errorf("the watch of %s failed: %w", src.What, err)
			case watch.Bookmark:
				continue
			}
			if v := resourceVersion(ev.Object); v != "" {
				rv = v
			}
			k := key(ev.Object)
			if ev.Type == watch.Deleted {
				delete(known, k)
			} else {
				known[k] = ev.Object
			}
			h.Observe(Event{Type: ev.Type, Object: ev.Object})
		}
	}
}
