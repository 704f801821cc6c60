// Package kuredapi reads and writes Kured's lock (package kured) on
// Kured's DaemonSet, so that Kustodian and Kured never disrupt more nodes
// together than Kured allows.
package kuredapi

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kustodian/kustodian/internal/kured"
)

// Locker reads and writes Kured's lock on its DaemonSet, under every key
// of Keys (kured.LockAnnotations when empty) and the key Kured's own
// arguments name.
type Locker struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
	Keys      []string
	Now       func() time.Time
}

func (k *Locker) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

// Locks is Kured's lock on ds as Kustodian honours it: under keys (all of
// kured.LockAnnotations when empty) and the key Kured's arguments name.
func Locks(ds *appsv1.DaemonSet, keys []string) (kured.Locks, error) {
	if len(keys) == 0 {
		keys = kured.LockAnnotations
	}
	return kured.ParseLocks(ds.Annotations, keys, Args(ds))
}

// Args is what the command lines of ds's containers say about Kured's
// lock (the first container that says something).
func Args(ds *appsv1.DaemonSet) kured.Args {
	for _, c := range ds.Spec.Template.Spec.Containers {
		a := kured.ParseArgs(append(append([]string(nil), c.Command...), c.Args...))
		if a != (kured.Args{}) {
			return a
		}
	}
	return kured.Args{}
}

// Read returns Kured's lock; exists is false when the DaemonSet is absent.
func (k *Locker) Read(ctx context.Context) (l kured.Locks, exists bool, err error) {
	ds, err := k.Client.AppsV1().DaemonSets(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return kured.Locks{}, false, nil
	}
	if err != nil {
		return kured.Locks{}, false, fmt.Errorf("reading Kured's DaemonSet %s/%s: %w", k.Namespace, k.Name, err)
	}
	l, err = Locks(ds, k.Keys)
	return l, true, err
}

// Acquire takes the lock for id under every key when each has room, in
// one update with the resourceVersion just read: of two writers racing,
// one wins. It returns false, with the reason, when a key is full or the
// race was lost; and true when the DaemonSet does not exist (no Kured,
// nothing to hold).
func (k *Locker) Acquire(ctx context.Context, id string) (bool, string, error) {
	ds, err := k.Client.AppsV1().DaemonSets(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("reading Kured's DaemonSet %s/%s: %w", k.Namespace, k.Name, err)
	}
	now := k.now()
	l, err := Locks(ds, k.Keys)
	if err != nil {
		return false, "", err
	}
	if l.HeldEverywhere(id) {
		return true, "", nil
	}
	entry, err := kured.Entry(id, now)
	if err != nil {
		return false, "", err
	}
	values, why, ok := l.TakeAll(id, entry, now)
	if !ok {
		return false, why, nil
	}
	if err := k.write(ctx, ds, values); err != nil {
		if apierrors.IsConflict(err) {
			return false, "lost the race for Kured's lock", nil
		}
		return false, "", err
	}
	return true, "", nil
}

// Release removes id from the lock under every key; a key id does not hold
// is left as it is.
func (k *Locker) Release(ctx context.Context, id string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds, err := k.Client.AppsV1().DaemonSets(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		l, _ := Locks(ds, k.Keys) // a key that does not parse holds no entry of ours to give back
		values := l.GiveBackAll(id)
		if len(values) == 0 {
			return nil
		}
		return k.write(ctx, ds, values)
	})
}

// write sets (or, for "", removes) the annotations with the DaemonSet's
// resourceVersion.
func (k *Locker) write(ctx context.Context, ds *appsv1.DaemonSet, values map[string]string) error {
	ds = ds.DeepCopy()
	for key, value := range values {
		if value == "" {
			delete(ds.Annotations, key)
			continue
		}
		if ds.Annotations == nil {
			ds.Annotations = map[string]string{}
		}
		ds.Annotations[key] = value
	}
	_, err := k.Client.AppsV1().DaemonSets(k.Namespace).Update(ctx, ds, metav1.UpdateOptions{})
	return err
}
