package agent

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/internal/kured/kuredapi"
)

// kuredLock reads Kured's lock from the cache; ok is false when Kured's
// DaemonSet is absent or kured.enabled is false.
func (a *Agent) kuredLock() (kured.Locks, bool) {
	if a.caches.kured == nil {
		return kured.Locks{}, false
	}
	obj, exists, err := a.caches.kured.GetByKey(a.kured.ds.String())
	if err != nil || !exists {
		return kured.Locks{}, false
	}
	ds, _ := obj.(*appsv1.DaemonSet)
	if ds == nil {
		return kured.Locks{}, false
	}
	l, err := kuredapi.Locks(ds, a.kured.keys)
	if err != nil {
		a.log.Warn("Kured's lock is unreadable; treating it as held", "err", err)
	}
	return l, true
}

// holdKured takes Kured's lock for this node while it holds its own, so
// that Kured reboots no other node meanwhile. false: Kured's lock is taken.
func (a *Agent) holdKured(ctx context.Context) (bool, string, error) {
	l, ok := a.kuredLock()
	if !ok {
		return true, "", nil
	}
	me := kured.HolderID(a.node)
	if l.HeldEverywhere(me) {
		return true, "", nil
	}
	return a.kured.locker.Acquire(ctx, me)
}

func (a *Agent) releaseKured(ctx context.Context) error {
	l, ok := a.kuredLock()
	if !ok {
		return nil
	}
	if !l.HeldAnywhere(kured.HolderID(a.node)) {
		return nil
	}
	if err := a.kured.locker.Release(ctx, kured.HolderID(a.node)); err != nil && !apierrors.IsForbidden(err) {
		return fmt.Errorf("releasing Kured's lock: %w", err)
	}
	return nil
}
