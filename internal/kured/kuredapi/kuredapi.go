// Package kuredapi reads and writes Kured's lock (package kured) on
// Kured's DaemonSet, so that Kustodian and Kured never disrupt more nodes
// together than Kured allows.
package kuredapi

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kustodian/kustodian/internal/kured"
)

// Locker reads and writes Kured's lock on its DaemonSet.
type Locker struct {
	Client    kubernetes.Interface
	Namespace string
	Name      string
	Now       func() time.Time
}

func (k *Locker) now() time.Time {
	if k.Now != nil {
		return k.Now()
	}
	return time.Now()
}

// Read returns Kured's lock; exists is false when the DaemonSet is absent.
func (k *Locker) Read(ctx context.Context) (l kured.Lock, exists bool, err error) {
	ds, err := k.Client.AppsV1().DaemonSets(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return kured.Lock{}, false, nil
	}
	if err != nil {
		return kured.Lock{}, false, fmt.Errorf("reading Kured's DaemonSet %s/%s: %w", k.Namespace, k.Name, err)
	}
	l, err = kured.ParseLock(ds.Annotations[kured.LockAnnotation])
	return l, true, err
}

// Acquire takes the lock for id when it has room, with the
// resourceVersion just read: of two writers racing, one wins. It returns
// false, with the holders, when the lock is full or the race was lost; and
// true when the DaemonSet does not exist (no Kured, nothing to hold).
func (k *Locker) Acquire(ctx context.Context, id string) (bool, string, error) {
	ds, err := k.Client.AppsV1().DaemonSets(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return true, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("reading Kured's DaemonSet %s/%s: %w", k.Namespace, k.Name, err)
	}
	now := k.now()
	value := ds.Annotations[kured.LockAnnotation]
	l, err := kured.ParseLock(value)
	if err != nil {
		return false, "", err
	}
	for _, h := range l.Holders {
		if h.NodeID == id {
			return true, "", nil // held already
		}
	}
	if l.Full(id, now) {
		return false, "Kured's lock is held by " + strings.Join(l.Others(id, now), ", "), nil
	}
	entry, err := kured.Entry(id, now)
	if err != nil {
		return false, "", err
	}
	taken, ok := kured.Take(value, entry)
	if !ok {
		return false, fmt.Sprintf("Kured's lock has a form Kustodian does not write into: %.80s", value), nil
	}
	if err := k.write(ctx, ds, taken); err != nil {
		if apierrors.IsConflict(err) {
			return false, "lost the race for Kured's lock", nil
		}
		return false, "", err
	}
	return true, "", nil
}

// Release removes id from the lock; a lock id does not hold is left as it is.
func (k *Locker) Release(ctx context.Context, id string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ds, err := k.Client.AppsV1().DaemonSets(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		value, held := kured.GiveBack(ds.Annotations[kured.LockAnnotation], id)
		if !held {
			return nil
		}
		return k.write(ctx, ds, value)
	})
}

// write sets (or, for "", removes) the annotation with the DaemonSet's
// resourceVersion.
func (k *Locker) write(ctx context.Context, ds *appsv1.DaemonSet, value string) error {
	ds = ds.DeepCopy()
	if value == "" {
		delete(ds.Annotations, kured.LockAnnotation)
	} else {
		if ds.Annotations == nil {
			ds.Annotations = map[string]string{}
		}
		ds.Annotations[kured.LockAnnotation] = value
	}
	_, err := k.Client.AppsV1().DaemonSets(k.Namespace).Update(ctx, ds, metav1.UpdateOptions{})
	return err
}
