package kured

import (
	"reflect"
	"testing"
	"time"
)

func TestParseArgs(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want Args
	}{
		{nil, Args{}},
		{[]string{"/usr/bin/kured", "--period=1m"}, Args{}},
		{[]string{"/usr/bin/kured", "--concurrency=2", "--lock-annotation=kured.dev/kured-node-lock"}, Args{Annotation: NextLockAnnotation, Concurrency: 2}},
		{[]string{"kured", "--concurrency=3", "--lock-annotation", "example.com/lock"}, Args{Annotation: "example.com/lock", Concurrency: 3}},
		{[]string{"kured", "--concurrency", "3"}, Args{}},
		{[]string{"kured", "--concurrency=zero"}, Args{}},
		{[]string{"kured", "--concurrency"}, Args{}},
	} {
		if got := ParseArgs(tc.argv); got != tc.want {
			t.Errorf("ParseArgs(%q) = %+v, want %+v", tc.argv, got, tc.want)
		}
	}
}

func TestLocksUnderBothKeys(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	me := HolderID("a")
	mine, err := Entry(me, now)
	if err != nil {
		t.Fatal(err)
	}
	kuredN1 := `{"nodeID":"n1","metadata":{"unschedulable":false},"created":"2026-11-22T11:00:00Z","TTL":0}`
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		args        Args
		full        bool     // no room for me
		others      []string // the holders it names
		taken       map[string]string
	}{{
		name:  "no key set: both created in the form of one owner",
		taken: map[string]string{LockAnnotation: mine, NextLockAnnotation: mine},
	}, {
		name:        "Kured before its rewrite holds the old key",
		annotations: map[string]string{LockAnnotation: kuredN1},
		full:        true, others: []string{"n1"},
	}, {
		name:        "Kured after its rewrite holds the new key",
		annotations: map[string]string{NextLockAnnotation: kuredN1},
		full:        true, others: []string{"n1"},
	}, {
		name:        "several owners under the old key, Kured's --concurrency=2: the new key is created in that form",
		annotations: map[string]string{LockAnnotation: `{"maxOwners":2,"locks":[` + kuredN1 + `]}`},
		args:        Args{Concurrency: 2},
		others:      []string{"n1"},
		taken: map[string]string{
			LockAnnotation:     `{"maxOwners":2,"locks":[` + kuredN1 + `,` + mine + `]}`,
			NextLockAnnotation: `{"maxOwners":2,"locks":[` + mine + `]}`,
		},
	}, {
		name:        "several owners under one key, no --concurrency: a created key has one owner, the form Kured's default reads",
		annotations: map[string]string{LockAnnotation: `{"maxOwners":2,"locks":[]}`},
		taken: map[string]string{
			LockAnnotation:     `{"maxOwners":2,"locks":[` + mine + `]}`,
			NextLockAnnotation: mine,
		},
	}, {
		name:        "a maxOwners above Kured's --concurrency counts as that",
		annotations: map[string]string{LockAnnotation: `{"maxOwners":9999,"locks":[` + kuredN1 + `]}`},
		args:        Args{Concurrency: 1},
		full:        true, others: []string{"n1"},
	}, {
		name: "Kured's --concurrency decides the form of a created key",
		args: Args{Concurrency: 3},
		taken: map[string]string{
			LockAnnotation:     `{"maxOwners":3,"locks":[` + mine + `]}`,
			NextLockAnnotation: `{"maxOwners":3,"locks":[` + mine + `]}`,
		},
	}, {
		name:        "room under one key, none under the other",
		annotations: map[string]string{LockAnnotation: `{"maxOwners":2,"locks":[]}`, NextLockAnnotation: kuredN1},
		full:        true, others: []string{"n1"},
	}, {
		name:        "held already under one key: only the other is written",
		annotations: map[string]string{LockAnnotation: mine},
		others:      nil,
		taken:       map[string]string{NextLockAnnotation: mine},
	}, {
		name:        "Kured's --lock-annotation names a third key",
		annotations: map[string]string{"example.com/lock": kuredN1},
		args:        Args{Annotation: "example.com/lock"},
		full:        true, others: []string{"n1"},
	}, {
		name:        "an unreadable key is held",
		annotations: map[string]string{NextLockAnnotation: "{not json"},
		full:        true, others: []string{Unreadable},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ls, _ := ParseLocks(tc.annotations, LockAnnotations, tc.args)
			if got := ls.Full(me, now); got != tc.full {
				t.Errorf("Full = %v, want %v", got, tc.full)
			}
			if got := ls.Others(me, now); !reflect.DeepEqual(got, tc.others) {
				t.Errorf("Others = %q, want %q", got, tc.others)
			}
			taken, why, ok := ls.TakeAll(me, mine, now)
			if ok == tc.full {
				t.Fatalf("TakeAll ok = %v (%s), want %v", ok, why, !tc.full)
			}
			if !ok {
				return
			}
			if !reflect.DeepEqual(taken, tc.taken) {
				t.Errorf("TakeAll wrote %q, want %q", taken, tc.taken)
			}
			// Written, the lock is held everywhere and given back wholly.
			after := map[string]string{}
			for k, v := range tc.annotations {
				after[k] = v
			}
			for k, v := range taken {
				after[k] = v
			}
			held, err := ParseLocks(after, LockAnnotations, tc.args)
			if err != nil || !held.HeldEverywhere(me) {
				t.Fatalf("after TakeAll: held everywhere %v (%v): %q", held.HeldEverywhere(me), err, after)
			}
			for k, v := range held.GiveBackAll(me) {
				after[k] = v
			}
			back, _ := ParseLocks(after, LockAnnotations, tc.args)
			if back.HeldAnywhere(me) {
				t.Fatalf("after GiveBackAll still held: %q", after)
			}
		})
	}
}
