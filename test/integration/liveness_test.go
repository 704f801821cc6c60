package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/agentproc"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// stop sends SIGTERM to the agent (by its PID), as systemd stops it, and
// waits for it to exit.
func (p *agentProc) stop() {
	p.t.Helper()
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	agentproc.Stop(cmd)
}

// A node that asks for maintenance gets the free lock, even when the queue
// it joins was last written by agents that have since been restarted with
// their state gone: the queue still names nodes that no longer ask. (Found
// by hand: node 0 stayed Waiting for ever, its agent retrying "the decision
// still needs {Queue:true}" while the lock was free.)
func TestAgentGetsTheFreeLockAfterAgentsRestartedWithTheirStateGone(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(15)
	const why = "agents run as a new user tries them: with the admin's kubeconfig"

	// 1. Five agents; node 0 in maintenance, the others queued behind it,
	// then node 0 done and the next one granted.
	first := make([]*agentProc, 5)
	for i := range first {
		first[i] = newAdminAgent(t, e, nodes[i], why, "--stay")
		first[i].start()
	}
	first[0].request("kernel")
	first[0].waitInProgress(cluster.DefaultTimeout)
	for _, a := range first[1:] {
		a.request("kernel")
	}
	for _, a := range first[1:] {
		waitRecord(e, a.node, "to wait in the queue", inStateSaying(lock.Waiting, "position"))
	}
	first[0].finish()
	var holder *agentProc
	e.Eventually("the next node to be in maintenance", cluster.DefaultTimeout, func(context.Context) error {
		for _, a := range first[1:] {
			if a.inProgress() {
				holder = a
				return nil
			}
		}
		return fmt.Errorf("none of %s..%s in maintenance; lock held by %q", nodes[1], nodes[4], lockHolder(e))
	})
	waitRecord(e, nodes[0], "to be gone (Idle)", func(r *lock.Record) error {
		if r != nil {
			return fmt.Errorf("state %s: %s", r.State, r.Message)
		}
		return nil
	})
	for _, a := range first {
		a.stop()
	}
	t.Logf("stopped the agents with %s in maintenance", holder.node)

	// 2. Agents for these nodes and ten more, each with a new, empty state
	// directory and no request: the holder's script is done (its request
	// is gone with its directory), so it completes; the others go Idle.
	second := make([]*agentProc, len(nodes))
	for i, n := range nodes {
		second[i] = newAdminAgent(t, e, n, why, "--stay")
		second[i].start()
	}
	e.Eventually("the lock to be free and every record gone", cluster.DefaultTimeout, func(context.Context) error {
		if h := lockHolder(e); h != "" {
			return fmt.Errorf("lock held by %s", h)
		}
		for _, n := range nodes[:5] {
			if r := record(e, n); r != nil {
				return fmt.Errorf("record of %s: %s: %s", n, r.State, r.Message)
			}
		}
		return nil
	})

	// 3. Node 0 asks again: nothing else asks, the lock is free.
	second[0].request("kernel again")
	second[0].waitInProgress(cluster.DefaultTimeout)
	second[0].finish()
	waitRecord(e, nodes[0], "to be gone (Idle)", func(r *lock.Record) error {
		if r != nil {
			return fmt.Errorf("state %s: %s", r.State, r.Message)
		}
		return nil
	})
}

// A waiting node whose record was written while its Node was gone (so
// under no group of its policy) gets the lock once its Node is back and its
// agent has restarted. The protocol's simulation found this (seed 44):
// before the fix, the new agent asked its group's queue for its own
// record, which, of another group, was not in it; it retried "the decision
// still needs {Queue:true}" for ever without writing the record again,
// while the lock was free.
func TestAgentWaitingWhileItsNodeWasGoneGetsTheLock(t *testing.T) {
	e := cluster.New(t)
	nodes := e.Nodes(1)
	node := nodes[0]
	labelNode(e, node, "topology.kubernetes.io/zone", "zone-a")
	nodecreds.Install(e, e.Namespace)
	if err := e.ApplyPolicy(`{metadata: {name: zones}, spec: {groupBy: topology.kubernetes.io/zone}}`); err != nil {
		t.Fatal(err)
	}
	// Admin credentials: a node-bound token would die with the Node.
	a := newAdminAgent(t, e, node, "its Node is deleted and created again", "--stay")
	a.notify = listenNotify(t)
	a.start()
	setPaused(e, true, "the test holds the rollout")
	a.notify.waitStatus(e, "idle")

	// The Node goes, and the request comes while it is gone: the record,
	// and the queue it joins, are of no group of the policy.
	saved := nodeObject(e, node)
	if err := e.Client.CoreV1().Nodes().Delete(e.Ctx, node, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting node %s: %v", node, err)
	}
	a.request("kernel")
	waitRecord(e, node, "to wait under no group while its Node is gone", func(r *lock.Record) error {
		if err := inStateSaying(lock.Waiting, "paused")(r); err != nil {
			return err
		}
		if r.Group != "" {
			return fmt.Errorf("group %q", r.Group)
		}
		return nil
	})
	// The agent restarts (an upgrade, a reboot) and finds its Node back.
	a.stop()
	if err := cluster.CreateNode(e.Ctx, e.Client, node, saved.Labels); err != nil {
		t.Fatalf("creating node %s again: %v", node, err)
	}
	a.start()
	setPaused(e, false, "")
	a.waitInProgress(cluster.DefaultTimeout)
	a.finish()
	waitRecord(e, node, "to be gone (Idle)", func(r *lock.Record) error {
		if r != nil {
			return fmt.Errorf("state %s: %s", r.State, r.Message)
		}
		return nil
	})
}

// Waiting nodes whose agents are stopped must not keep a free lock idle:
// a node that asks behind them gets the lock within a minute of its
// release, however many of them stand ahead (the queue's head is found
// gone after four heartbeats, and one node behind makes the summary again
// within the heartbeat after). Found by hand: with 10 stopped ahead, the
// lock stayed free 2m36s ("the queue has not moved for 2m36s: kwok-node-3
// is gone"), a heartbeat more for each. With the default heartbeat (10 s;
// the other tests run with 1 s), so about a minute of waiting.
func TestAgentPassesStoppedWaitersWithinAMinute(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(12)
	flags := []string{"--stay", "--queue-heartbeat", "10s"}
	holder, stopped, live := newAgent(t, e, nodes[0], flags...), make([]*agentProc, 10), newAgent(t, e, nodes[11], flags...)
	holder.start()
	holder.request("kernel")
	holder.waitInProgress(cluster.DefaultTimeout)
	for i := range stopped {
		stopped[i] = newAgent(t, e, nodes[1+i], flags...)
		stopped[i].start()
		stopped[i].request("kernel")
	}
	for _, a := range stopped {
		waitRecord(e, a.node, "to wait in the queue", inState(lock.Waiting))
	}
	live.start()
	live.request("kernel")
	waitRecord(e, live.node, "to wait in the queue", inState(lock.Waiting))
	for _, a := range stopped {
		a.stop()
	}
	holder.finish()
	e.Eventually("the holder to release the lock", cluster.DefaultTimeout, func(context.Context) error {
		if h := lockHolder(e); h != "" {
			return fmt.Errorf("held by %s", h)
		}
		return nil
	})
	freed := time.Now()
	e.Eventually("the last node to take the free lock within a minute, past the 10 stopped ahead of it", time.Minute, func(context.Context) error {
		if h := lockHolder(e); h != live.node {
			return fmt.Errorf("lock held by %q", h)
		}
		return nil
	})
	t.Logf("the lock was free for %s with 10 stopped waiters ahead", time.Since(freed).Round(100*time.Millisecond))
}
