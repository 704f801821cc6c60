package ctl

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/status"
)

func newReleaseCommand(o *options) *cobra.Command {
	var uncordon bool
	cmd := &cobra.Command{
		Use:   "release NODE",
		Short: "Break the lock of a node whose maintenance failed, so the rollout can go on",
		Long: `release frees the locks NODE holds, so that the next node in the queue can
proceed. NODE stays cordoned unless --uncordon is given. Its agent records Failed
("lock released by an admin") and does not take the lock again for the same
request: removing the request file (after repairing the node) returns the node to
Idle, and a new request starts over.`,
		Example: `  kustodian-ctl release node-3
  kustodian-ctl release node-3 --uncordon`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := o.client()
			if err != nil {
				return err
			}
			return release(cmd.Context(), o, client, args[0], uncordon)
		},
	}
	cmd.Flags().BoolVar(&uncordon, "uncordon", false, "also make the node schedulable again")
	return cmd
}

func release(ctx context.Context, o *options, client kubernetes.Interface, node string, uncordon bool) error {
	ns := o.namespace()
	s, err := (status.Reader{Client: client, Namespace: ns}).Read(ctx)
	if err != nil {
		return err
	}
	var held []status.Lock
	for _, l := range s.Locks {
		if l.Holder == node {
			held = append(held, l)
		}
	}
	var current *status.Node
	for i := range s.Nodes {
		if s.Nodes[i].Name == node {
			current = &s.Nodes[i]
		}
	}
	if current == nil {
		return fmt.Errorf("node %q not found: there is no such Node and no Kustodian record for it in namespace %s", node, ns)
	}
	if len(held) == 0 {
		return fmt.Errorf("node %s holds no lock in namespace %s (it is %s); nothing to release", node, ns, current.State)
	}
	locks := &lock.Client{Kube: client, Namespace: ns}
	out := o.streams.Out
	// Mark the record first: an agent that saw its lock go before the mark
	// would queue again at once, and it is first in line.
	if err := markReleased(ctx, locks, node); err != nil {
		return status.Explain(err, "update", "leases.coordination.k8s.io", ns)
	}
	// The next nodes are named before the locks go free (as an agent
	// giving its lock back does): the node released is not Waiting, so the
	// summary made now leaves it out.
	named := map[lock.GroupRef]bool{}
	for _, l := range held {
		lease, err := client.CoordinationV1().Leases(ns).Get(ctx, l.Name, metav1.GetOptions{})
		if err != nil {
			return status.Explain(err, "get", "leases.coordination.k8s.io", ns)
		}
		if g, ok := lock.GroupOfLease(lease); ok && !named[g] {
			named[g] = true
			if _, _, err := locks.Renominate(ctx, g, "kustodian-ctl", status.DefaultStaleAfter); err != nil {
				return status.Explain(err, "update", "leases.coordination.k8s.io", ns)
			}
		}
	}
	for _, l := range held {
		if _, err := locks.Release(ctx, l.Name, node); err != nil {
			return status.Explain(err, "update", "leases.coordination.k8s.io", ns)
		}
		fmt.Fprintf(out, "released %s, held by %s for %s\n", l.Name, node, age(l.Since, time.Now()))
	}
	if uncordon {
		patch := []byte(fmt.Sprintf(`{"spec":{"unschedulable":false},"metadata":{"annotations":{%q:null},"labels":{%q:null}}}`,
			lock.AnnotationCordoned, lock.LabelState))
		if _, err := client.CoreV1().Nodes().Patch(ctx, node, types.StrategicMergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return status.Explain(err, "patch", "nodes", "")
		}
		fmt.Fprintf(out, "uncordoned %s\n", node)
	} else if current.CordonedBy != "" {
		fmt.Fprintf(out, "%s stays cordoned: repair it, then remove its request file (its agent uncordons it), or run kubectl uncordon %s\n", node, node)
	}
	fmt.Fprintf(out, "the agent on %s records Failed and will not take the lock again for this request; the next node in the queue may proceed\n", node)
	return nil
}

// markReleased tells the node's agent, through its record, that its lock was
// released by an admin for its current request.
func markReleased(ctx context.Context, locks *lock.Client, node string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := locks.Kube.CoordinationV1().Leases(locks.Namespace).Get(ctx, lock.RecordName(node), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil // no agent record to mark: its agent never published one
		}
		if err != nil {
			return err
		}
		r := lock.RecordFromLease(l)
		r.ReleasedRequest = r.RequestID
		if r.ReleasedRequest == "" {
			r.ReleasedRequest = "*"
		}
		r.State = lock.Failed
		r.Since = time.Now().Truncate(time.Second)
		r.Message = "lock released by an admin (kustodian-ctl release)"
		l = l.DeepCopy()
		r.ApplyTo(l)
		_, err = locks.Kube.CoordinationV1().Leases(locks.Namespace).Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
}
