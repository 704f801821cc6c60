package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/agentproc"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// gateToCordon: a waiting node held by a closed gate of its policy (a
// window, then a blocking pod); the gate opens (the policy updated, the pod
// deleted) and the Node is seen unschedulable through a watch.
func (b *bench) gateToCordon(ctx context.Context) error {
	ns, err := b.namespace(ctx)
	if err != nil {
		return err
	}
	node := cluster.NodeName(1)
	s, err := b.spec(ctx, ns, node)
	if err != nil {
		return err
	}
	apply := func(spec map[string]any) error { return nodecreds.ApplyPolicy(ctx, b.c.Config, ns, "bench", spec) }
	later := time.Now().UTC().Add(3 * time.Hour)
	closedWindow := map[string]any{"windows": []any{map[string]any{"start": later.Format("15:04"), "end": later.Add(time.Hour).Format("15:04")}}}
	blockers := map[string]any{"blockers": map[string]any{"podSelector": map[string]any{"matchLabels": map[string]any{"bench.kustodian.io/block": "true"}}}}
	if err := apply(closedWindow); err != nil {
		return err
	}
	cmd, err := startAgent(ctx, s)
	if err != nil {
		return err
	}
	defer agentproc.Stop(cmd)
	measure := func(close, open func() error, held string) ([]time.Duration, error) {
		var lat []time.Duration
		for i := 0; i <= b.o.runs; i++ { // run 0 warms up
			if err := close(); err != nil {
				return nil, err
			}
			if err := os.WriteFile(s.RequestFile(), nil, 0o644); err != nil {
				return nil, err
			}
			err := cluster.Eventually(ctx, time.Minute, func(ctx context.Context) error {
				l, err := b.c.Client.CoordinationV1().Leases(ns).Get(ctx, lock.RecordName(node), metav1.GetOptions{})
				if err != nil {
					return err
				}
				if r := lock.RecordFromLease(l); !strings.Contains(r.Message, held) {
					return fmt.Errorf("message %q", r.Message)
				}
				return nil
			})
			if err != nil {
				return nil, err
			}
			d, err := b.timeToCordon(ctx, node, open)
			if err != nil {
				return nil, err
			}
			if i > 0 {
				lat = append(lat, d)
			}
			if err := b.finish(ctx, ns, s); err != nil {
				return nil, err
			}
		}
		return lat, nil
	}
	lat, err := measure(func() error { return apply(closedWindow) },
		func() error {
			return apply(map[string]any{"windows": []any{map[string]any{"start": "00:00", "end": "24:00"}}})
		}, "outside window")
	if err != nil {
		return err
	}
	report("window opened (policy update) to cordon", lat)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "backup", Namespace: ns, Labels: map[string]string{"bench.kustodian.io/block": "true"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "b", Image: "registry.k8s.io/pause:3.10"}}}}
	lat, err = measure(func() error {
		if err := apply(blockers); err != nil {
			return err
		}
		_, err := b.c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
		return err
	}, func() error {
		return b.c.Client.CoreV1().Pods(ns).Delete(ctx, "backup", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	}, "blocked by pod")
	if err != nil {
		return err
	}
	report("blocking pod deleted to cordon", lat)
	return nil
}

// releaseToGrant: A holds the lock, B waits; A's release and B's grant are
// seen through one watch of the lock Lease.
func (b *bench) releaseToGrant(ctx context.Context) error {
	ns, err := b.namespace(ctx)
	if err != nil {
		return err
	}
	var specs []agentproc.Spec
	for _, node := range []string{cluster.NodeName(1), cluster.NodeName(2)} {
		s, err := b.spec(ctx, ns, node)
		if err != nil {
			return err
		}
		specs = append(specs, s)
	}
	for _, s := range specs {
		cmd, err := startAgent(ctx, s)
		if err != nil {
			return err
		}
		defer agentproc.Stop(cmd)
	}
	var lat []time.Duration
	for i := 0; i <= b.o.runs; i++ {
		holder, waiter := specs[i%2], specs[(i+1)%2]
		if err := os.WriteFile(holder.RequestFile(), nil, 0o644); err != nil {
			return err
		}
		if err := waitFile(ctx, holder.InProgressFile()); err != nil {
			return err
		}
		if err := os.WriteFile(waiter.RequestFile(), nil, 0o644); err != nil {
			return err
		}
		if err := cluster.Eventually(ctx, time.Minute, func(ctx context.Context) error {
			l, err := b.c.Client.CoordinationV1().Leases(ns).Get(ctx, lock.RecordName(waiter.Node), metav1.GetOptions{})
			if err != nil || lock.RecordFromLease(l).State != lock.Waiting {
				return errors.New("not waiting yet")
			}
			return nil
		}); err != nil {
			return err
		}
		w, err := b.c.Client.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", lock.DefaultGroup.LockName(0)).String()})
		if err != nil {
			return err
		}
		if err := os.Remove(holder.RequestFile()); err != nil {
			return err
		}
		// The handoff is timed by the agents' own stamps, on this host's
		// one clock: the releaser's released-at and the grantee's
		// acquireTime. When this process happened to read the two events
		// says more about its scheduling than about the agents.
		var released, granted time.Time
		for ev := range w.ResultChan() {
			l, ok := ev.Object.(*coordv1.Lease)
			if !ok || lock.Holder(l) != waiter.Node {
				continue
			}
			if l.Spec.AcquireTime == nil {
				return fmt.Errorf("lock %s granted to %s without an acquireTime", l.Name, waiter.Node)
			}
			t, err := time.Parse(time.RFC3339Nano, l.Annotations[lock.AnnotationReleasedAt])
			if err != nil {
				return fmt.Errorf("lock %s granted to %s: %s: %w", l.Name, waiter.Node, lock.AnnotationReleasedAt, err)
			}
			released, granted = t, l.Spec.AcquireTime.Time
			break
		}
		w.Stop()
		if granted.IsZero() {
			return errors.New("the lock watch ended before the handoff")
		}
		if granted.Before(released) {
			return fmt.Errorf("lock granted at %s, before its release at %s", granted, released)
		}
		if i > 0 {
			lat = append(lat, granted.Sub(released))
		}
		if err := b.finish(ctx, ns, waiter); err != nil {
			return err
		}
		if err := cluster.Eventually(ctx, time.Minute, func(ctx context.Context) error {
			_, err := b.c.Client.CoordinationV1().Leases(ns).Get(ctx, lock.RecordName(holder.Node), metav1.GetOptions{})
			if err == nil {
				return errors.New("holder's record still there")
			}
			return nil
		}); err != nil {
			return err
		}
	}
	report("release to next grant (target < 0.5 s)", lat)
	return nil
}
