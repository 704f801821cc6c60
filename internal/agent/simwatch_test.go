package agent

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/kustodian/kustodian/test/simapi"
)

// simWatch is one informer of one agent: its store, and how far it has
// read the server's change log.
type simWatch struct {
	name    string
	res     schema.GroupVersionResource
	ns      string
	match   func(runtime.Object) bool
	store   cache.Store
	handler cache.ResourceEventHandler
	cursor  int64
	trace   func(format string, args ...any)
	// stopped: the agent stopped this watch (asleep far back); it
	// delivers nothing until started again.
	stopped bool
	// delivered counts the changes it delivered.
	delivered int
	// quiet: the log's revision up to which a look found nothing for it
	// since it last delivered or relisted (0: none), so the next look
	// reads only what came after (with thousands of agents, every action
	// asks every watch).
	quiet int64
}

// simGroups is the agent's seam to its group Leases' watch: stopping it
// stops the delivery; starting it relists, as a new informer lists.
type simGroups struct {
	sw     *simWatch
	api    *simapi.Server
	sleeps *int // the world's count of stops
}

func (g simGroups) watch(context.Context) (cache.Store, error) {
	if g.api.Down {
		return nil, errors.New("simulated: the API server is away")
	}
	g.sw.stopped = false
	g.sw.relist(g.api)
	return g.sw.store, nil
}

func (g simGroups) stop() {
	if !g.sw.stopped {
		*g.sleeps++
	}
	g.sw.stopped = true
}

// relevant: the change is one this watch delivers (its selector matches
// the object, or matched it before: then the informer sees it go).
func (sw *simWatch) relevant(c simapi.Change) bool {
	if c.Key.Resource != sw.res || (sw.ns != "" && c.Key.Namespace != sw.ns) {
		return false
	}
	if sw.match(c.Object) {
		return true
	}
	key := c.Key.Name
	if c.Key.Namespace != "" {
		key = c.Key.Namespace + "/" + key
	}
	_, had, _ := sw.store.GetByKey(key)
	return had
}

// relist replaces the store with what the server holds now, as an
// informer does at its start and after a 410 Gone.
func (sw *simWatch) relist(api *simapi.Server) {
	if sw.stopped {
		return
	}
	items, rv := api.List(sw.res, sw.ns, nil, sw.match)
	old := map[string]any{}
	for _, o := range sw.store.List() {
		k, _ := cache.MetaNamespaceKeyFunc(o)
		old[k] = o
	}
	list := make([]any, len(items))
	for i, o := range items {
		list[i] = o
	}
	_ = sw.store.Replace(list, fmt.Sprint(rv))
	for _, o := range items {
		k, _ := cache.MetaNamespaceKeyFunc(o)
		if prev, ok := old[k]; ok {
			sw.handler.OnUpdate(prev, o)
			delete(old, k)
		} else {
			sw.handler.OnAdd(o, false)
		}
	}
	keys := make([]string, 0, len(old))
	for k := range old {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		sw.handler.OnDelete(old[k])
	}
	sw.cursor = rv
	sw.quiet = 0
}

// pending: the watch has a change not yet delivered, or the log no longer
// reaches back to it (it must relist).
func (sw *simWatch) pending(api *simapi.Server) bool {
	if sw.stopped {
		return false
	}
	if api.Compacted(sw.cursor) {
		return true // it relists
	}
	from := sw.cursor
	if sw.quiet != 0 {
		if sw.quiet == api.RV() {
			return false // nothing new since the last look
		}
		// Nothing up to quiet was for it, and its store has not changed
		// since: read on from there.
		from = sw.quiet
	}
	changes, _ := api.ChangesSince(from)
	for _, c := range changes {
		if sw.relevant(c) {
			return true
		}
	}
	sw.quiet = api.RV()
	return false
}

// deliver delivers up to n of the pending changes, in order (all when n
// < 0); a watch that fell behind the log relists.
func (sw *simWatch) deliver(api *simapi.Server, n int) {
	if sw.stopped {
		return
	}
	changes, ok := api.ChangesSince(sw.cursor)
	if !ok {
		sw.relist(api)
		return
	}
	sw.quiet = 0
	for _, c := range changes {
		if n == 0 {
			return
		}
		sw.cursor = c.RV
		if !sw.relevant(c) {
			continue
		}
		n--
		sw.delivered++
		if simVerbose && sw.trace != nil {
			sw.trace("watch %s delivers %s %s@%d", sw.name, c.Type, c.Key.Name, c.RV)
		}
		key := c.Key.Name
		if c.Key.Namespace != "" {
			key = c.Key.Namespace + "/" + key
		}
		prev, had, _ := sw.store.GetByKey(key)
		obj := c.Object.DeepCopyObject()
		switch {
		case c.Type == watch.Deleted || !sw.match(obj):
			if had {
				_ = sw.store.Delete(prev)
				sw.handler.OnDelete(prev)
			}
		case had:
			_ = sw.store.Update(obj)
			sw.handler.OnUpdate(prev, obj)
		default:
			_ = sw.store.Add(obj)
			sw.handler.OnAdd(obj, false)
		}
	}
	sw.cursor = api.RV()
}
