package kured

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// HolderID is how Kustodian names itself in Kured's lock: never the bare
// node name, or Kured on that node would take the lock for its own and
// release it.
func HolderID(node string) string { return "kustodian:" + node }

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
func (k *Locker) Read(ctx context.Context) (l Lock, exists bool, err error) {
	ds, err := k.Client.AppsV1().DaemonSets(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return Lock{}, false, nil
	}
	if err != nil {
		return Lock{}, false, fmt.Errorf("reading Kured's DaemonSet %s/%s: %w", k.Namespace, k.Name, err)
	}
	l, err = ParseLock(ds.Annotations[LockAnnotation])
	return l, true, err
}

// Others returns the active holders of the lock other than id.
func (l Lock) Others(id string, now time.Time) []string {
	var out []string
	for _, h := range l.Active(now) {
		if h.NodeID != id {
			out = append(out, h.NodeID)
		}
	}
	return out
}

// Full reports whether the lock has no room for id.
func (l Lock) Full(id string, now time.Time) bool {
	active := l.Active(now)
	for _, h := range active {
		if h.NodeID == id {
			return false
		}
	}
	if l.MaxOwners > 0 {
		return len(active) >= l.MaxOwners
	}
	return len(active) > 0
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
	l, err := ParseLock(ds.Annotations[LockAnnotation])
	if err != nil {
		return false, "", err
	}
	if l.Full(id, now) {
		return false, fmt.Sprintf("Kured's lock is held by %v", l.Others(id, now)), nil
	}
	for _, h := range l.Active(now) {
		if h.NodeID == id {
			return true, "", nil // held already
		}
	}
	mine := Holder{NodeID: id, Created: now.UTC().Truncate(time.Second)}
	var value []byte
	if l.MaxOwners > 0 {
		l.Holders = append(l.Active(now), mine)
		value, err = json.Marshal(multiLock{MaxOwners: l.MaxOwners, Locks: l.Holders})
	} else {
		value, err = json.Marshal(mine)
	}
	if err != nil {
		return false, "", err
	}
	if err := k.write(ctx, ds, string(value)); err != nil {
		if apierrors.IsConflict(err) {
			return false, "lost the race for Kured's lock", nil
		}
		return false, "", err
	}
	return true, "", nil
}

type multiLock struct {
	MaxOwners int      `json:"maxOwners"`
	Locks     []Holder `json:"locks"`
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
		l, err := ParseLock(ds.Annotations[LockAnnotation])
		if err != nil {
			return err
		}
		var kept []Holder
		held := false
		for _, h := range l.Holders {
			if h.NodeID == id {
				held = true
				continue
			}
			kept = append(kept, h)
		}
		if !held {
			return nil
		}
		value := ""
		if l.MaxOwners > 0 {
			b, err := json.Marshal(multiLock{MaxOwners: l.MaxOwners, Locks: append([]Holder{}, kept...)})
			if err != nil {
				return err
			}
			value = string(b)
		}
		return k.write(ctx, ds, value)
	})
}

// write sets (or, for "", removes) the annotation with the DaemonSet's
// resourceVersion.
func (k *Locker) write(ctx context.Context, ds *appsv1.DaemonSet, value string) error {
	ds = ds.DeepCopy()
	if value == "" {
		delete(ds.Annotations, LockAnnotation)
	} else {
		if ds.Annotations == nil {
			ds.Annotations = map[string]string{}
		}
		ds.Annotations[LockAnnotation] = value
	}
	_, err := k.Client.AppsV1().DaemonSets(k.Namespace).Update(ctx, ds, metav1.UpdateOptions{})
	return err
}
