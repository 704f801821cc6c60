package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/agentproc"
	"github.com/kustodian/kustodian/test/cluster"
)

// handoffUnderLoad times release → next grant with `waiting` agent
// processes (one per node, node-scoped, as on a fleet) queued behind the
// holder, for each number in --handoff-waiting. The queue is kept full:
// the node that just finished asks again, at the back. It also samples the
// resident memory of every agent (agentproc.RSS) while they wait.
func (b *bench) handoffUnderLoad(ctx context.Context, waiting int) error {
	ns, err := b.namespace(ctx)
	if err != nil {
		return err
	}
	n := waiting + 1
	specs := make([]agentproc.Spec, n)
	cmds := make([]*exec.Cmd, n)
	for i := range specs {
		if specs[i], err = b.spec(ctx, ns, cluster.NodeName(i)); err != nil {
			return err
		}
	}
	for i, s := range specs {
		if cmds[i], err = startAgent(ctx, s); err != nil {
			return err
		}
		defer agentproc.Stop(cmds[i])
	}
	// Ask in order, each once the one before is recorded, so that the
	// first is granted and the others queue behind it.
	for _, s := range specs {
		if err := os.WriteFile(s.RequestFile(), nil, 0o644); err != nil {
			return err
		}
		if err := cluster.Eventually(ctx, time.Minute, func(ctx context.Context) error {
			_, err := b.c.Client.CoordinationV1().Leases(ns).Get(ctx, lock.RecordName(s.Node), metav1.GetOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("%s never recorded its request: %w", s.Node, err)
		}
	}
	byNode := map[string]agentproc.Spec{}
	for _, s := range specs {
		byNode[s.Node] = s
	}
	lockName := lock.DefaultGroup.LockName(0)
	holderOf := func(ctx context.Context) (string, error) {
		l, err := b.c.Client.CoordinationV1().Leases(ns).Get(ctx, lockName, metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return lock.Holder(l), nil
	}
	var lat, delivered []time.Duration
	var rss []int64
	runs := b.o.runs * 3
	for i := 0; i <= runs; i++ { // run 0 warms up
		holder, err := holderOf(ctx)
		if err != nil {
			return err
		}
		h, ok := byNode[holder]
		if !ok {
			return fmt.Errorf("lock %s held by %q, none of the agents", lockName, holder)
		}
		if err := waitFile(ctx, h.InProgressFile()); err != nil {
			return err
		}
		// The others have had time to settle as waiters.
		if err := cluster.Eventually(ctx, time.Minute, func(ctx context.Context) error {
			list, err := b.c.Client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			w := 0
			for j := range list.Items {
				if lock.IsRecordName(list.Items[j].Name) && lock.RecordFromLease(&list.Items[j]).State == lock.Waiting {
					w++
				}
			}
			if w < waiting {
				return fmt.Errorf("%d of %d waiting", w, waiting)
			}
			return nil
		}); err != nil {
			return err
		}
		for _, c := range cmds {
			rss = append(rss, agentproc.RSS(c.Process.Pid))
		}
		w, err := b.c.Client.CoordinationV1().Leases(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", lockName).String()})
		if err != nil {
			return err
		}
		if err := os.Remove(h.RequestFile()); err != nil {
			return err
		}
		var released, granted, seen time.Time
		for ev := range w.ResultChan() {
			l, ok := ev.Object.(*coordv1.Lease)
			if ok && lock.Holder(l) == "" && seen.IsZero() {
				seen = time.Now() // the release, as a watcher outside the agents gets it
			}
			if !ok || lock.Holder(l) == "" || lock.Holder(l) == holder {
				continue
			}
			t, err := time.Parse(time.RFC3339Nano, l.Annotations[lock.AnnotationReleasedAt])
			if err != nil || l.Spec.AcquireTime == nil {
				return fmt.Errorf("lock %s granted to %s without released-at or acquireTime", l.Name, lock.Holder(l))
			}
			released, granted = t, l.Spec.AcquireTime.Time
			break
		}
		w.Stop()
		if granted.IsZero() {
			return errors.New("the lock watch ended before the handoff")
		}
		if i > 0 {
			lat = append(lat, granted.Sub(released))
			if !seen.IsZero() {
				delivered = append(delivered, seen.Sub(released))
			}
		}
		// The one that finished asks again, at the back of the queue.
		if err := cluster.Eventually(ctx, time.Minute, func(ctx context.Context) error {
			_, err := b.c.Client.CoordinationV1().Leases(ns).Get(ctx, lock.RecordName(h.Node), metav1.GetOptions{})
			if err == nil {
				return errors.New("the former holder's record is still there")
			}
			return nil
		}); err != nil {
			return err
		}
		if err := os.WriteFile(h.RequestFile(), nil, 0o644); err != nil {
			return err
		}
	}
	report(fmt.Sprintf("release to next grant, %d waiting", waiting), lat)
	if len(delivered) > 0 {
		report("  the release seen by the bench's own watch", delivered)
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("%-52s p90 %s\n", "", round(lat[len(lat)*9/10]))
	sort.Slice(rss, func(i, j int) bool { return rss[i] < rss[j] })
	fmt.Printf("%-52s median %.1f MiB, max %.1f MiB (target < 40 MiB)\n", fmt.Sprintf("agents' resident memory, %d agents waiting", waiting),
		float64(rss[len(rss)/2])/(1<<20), float64(rss[len(rss)-1])/(1<<20))
	return nil
}
