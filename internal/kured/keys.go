package kured

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// NextLockAnnotation is the key Kured's rewrite keeps its lock under
// (LockAnnotation before it). Kured's --lock-annotation sets either.
const NextLockAnnotation = "kured.dev/kured-node-lock"

// LockAnnotations are the keys Kustodian reads and writes Kured's lock
// under by default: both, so that upgrading Kured from one to the other
// never leaves the two tools blind to each other.
var LockAnnotations = []string{LockAnnotation, NextLockAnnotation}

// Keyed is Kured's lock under one annotation key.
type Keyed struct {
	Key   string
	Value string // the annotation as it is; "" when absent
	Lock  Lock
}

// Locks is Kured's lock under each key Kustodian honours. An absent key is
// a free lock: the Kured that uses it would take it, so Kustodian writes
// its entry there too.
type Locks struct {
	Keys []Keyed
	// Concurrency is Kured's --concurrency where its DaemonSet says it (0:
	// unknown): the form (one owner or several) of a key Kustodian creates.
	Concurrency int
}

// Unreadable is the holder that stands for a lock value Kustodian cannot
// parse: such a lock is held.
const Unreadable = "(unreadable)"

// ParseLocks reads Kured's lock under keys (and under the key Kured's own
// arguments name, see Args) from a DaemonSet's annotations. A value that
// does not parse counts as held by Unreadable, and the error says where.
func ParseLocks(annotations map[string]string, keys []string, args Args) (Locks, error) {
	all := slices.Clone(keys)
	if args.Annotation != "" && !slices.Contains(all, args.Annotation) {
		all = append(all, args.Annotation)
	}
	ls := Locks{Concurrency: args.Concurrency}
	var errs []string
	for _, k := range all {
		v := annotations[k]
		l, err := ParseLock(v)
		if err != nil {
			errs = append(errs, fmt.Sprintf("annotation %s: %v", k, err))
			l = Lock{MaxOwners: 1, Holders: []Holder{{NodeID: Unreadable}}}
		}
		ls.Keys = append(ls.Keys, Keyed{Key: k, Value: v, Lock: l})
	}
	if errs != nil {
		return ls, fmt.Errorf("Kured's lock: %s", strings.Join(errs, "; "))
	}
	return ls, nil
}

// Full reports whether the lock under any key has no room for id. A
// maxOwners above Kured's own --concurrency counts as that concurrency:
// the value is written by nodes, Kured's flag by its admin.
func (ls Locks) Full(id string, now time.Time) bool {
	for _, k := range ls.Keys {
		l := k.Lock
		if ls.Concurrency > 0 && l.MaxOwners > ls.Concurrency {
			l.MaxOwners = ls.Concurrency
		}
		if l.Full(id, now) {
			return true
		}
	}
	return false
}

// Others returns the holders other than id under every key, each once.
func (ls Locks) Others(id string, now time.Time) []string {
	var out []string
	for _, k := range ls.Keys {
		for _, h := range k.Lock.Others(id, now) {
			if !slices.Contains(out, h) {
				out = append(out, h)
			}
		}
	}
	return out
}

// Active returns the holders whose TTL has not run out, under every key,
// each once.
func (ls Locks) Active(now time.Time) []Holder {
	var out []Holder
	seen := map[string]bool{}
	for _, k := range ls.Keys {
		for _, h := range k.Lock.Active(now) {
			if !seen[h.NodeID] {
				seen[h.NodeID] = true
				out = append(out, h)
			}
		}
	}
	return out
}

// MaxOwners is the smallest number of owners a key of several owners
// allows; 0 when no key has that form.
func (ls Locks) MaxOwners() int {
	n := 0
	for _, k := range ls.Keys {
		if m := k.Lock.MaxOwners; m > 0 && (n == 0 || m < n) {
			n = m
		}
	}
	return n
}

// holds reports whether id is an entry of l.
func (l Lock) holds(id string) bool {
	for _, h := range l.Holders {
		if h.NodeID == id {
			return true
		}
	}
	return false
}

// HeldEverywhere reports whether id holds the lock under every key.
func (ls Locks) HeldEverywhere(id string) bool {
	for _, k := range ls.Keys {
		if !k.Lock.holds(id) {
			return false
		}
	}
	return len(ls.Keys) > 0
}

// HeldAnywhere reports whether id holds the lock under some key.
func (ls Locks) HeldAnywhere(id string) bool {
	for _, k := range ls.Keys {
		if k.Lock.holds(id) {
			return true
		}
	}
	return false
}

// TakeAll returns the values to write so that entry (id's, as Entry wrote
// it) holds the lock under every key, every other byte of each value kept:
// a key id holds already is left out; an absent key is created in the form
// Kured would write it (several owners only when Kured's --concurrency
// says so). ok is false with the reason when some key
// has no room for id or a form Kustodian does not write into.
func (ls Locks) TakeAll(id, entry string, now time.Time) (map[string]string, string, bool) {
	if ls.Full(id, now) {
		return nil, "Kured's lock is held by " + strings.Join(ls.Others(id, now), ", "), false
	}
	out := map[string]string{}
	for _, k := range ls.Keys {
		if k.Lock.holds(id) {
			continue
		}
		if k.Value == "" {
			if n := ls.owners(); n > 1 {
				out[k.Key] = fmt.Sprintf(`{"maxOwners":%d,"locks":[%s]}`, n, entry)
				continue
			}
		}
		v, ok := Take(k.Value, entry)
		if !ok {
			return nil, fmt.Sprintf("Kured's lock (annotation %s) has a form Kustodian does not write into: %.80s", k.Key, k.Value), false
		}
		out[k.Key] = v
	}
	return out, "", true
}

// owners is how many owners Kured allows, for a key Kustodian creates:
// Kured's --concurrency, else 1. Never another key's maxOwners: a Kured of
// one owner reads any value it finds as held (by "" when it is a list),
// so the form must be the one its own flag calls for.
func (ls Locks) owners() int {
	return max(ls.Concurrency, 1)
}

// GiveBackAll returns the values to write so that id holds the lock under
// no key ("" removes the annotation), every other byte kept; keys id does
// not hold are left out.
func (ls Locks) GiveBackAll(id string) map[string]string {
	out := map[string]string{}
	for _, k := range ls.Keys {
		if v, ok := GiveBack(k.Value, id); ok {
			out[k.Key] = v
		}
	}
	return out
}

// Args is what Kured's own command line says about its lock.
type Args struct {
	Annotation  string // --lock-annotation, "" when not given
	Concurrency int    // --concurrency, 0 when not given
}

// ParseArgs reads --lock-annotation (as "--flag=value" or "--flag
// value") and --concurrency (as "--concurrency=N" only: the form the
// admission policy can check) from a container's command and arguments.
func ParseArgs(argv []string) Args {
	var a Args
	for i := 0; i < len(argv); i++ {
		name, value, eq := strings.Cut(argv[i], "=")
		if !eq && i+1 < len(argv) && name == "--lock-annotation" {
			value = argv[i+1]
			i++
		}
		switch name {
		case "--lock-annotation":
			a.Annotation = value
		case "--concurrency":
			if n, err := strconv.Atoi(value); err == nil && n > 0 {
				a.Concurrency = n
			}
		}
	}
	return a
}
