package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/gates"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/nodemarks"
	"github.com/kustodian/kustodian/internal/policy"
)

// The look-ups a decision asks for (decide.Need): fresh reads of the API
// server, a gate command, Kured's lock, made in the one loop of decide.

// decide takes a snapshot, looks up what the decision needs, and decides.
func (a *Agent) decide(ctx context.Context) (decide.Decision, view, error) {
	if err := a.listAgain(ctx); err != nil {
		return decide.Decision{}, view{}, err
	}
	s, err := a.snapshot()
	if err != nil {
		return decide.Decision{}, s, err
	}
	d := decide.Next(s.Snapshot)
	for range 3 {
		if d.Need.Empty() {
			break
		}
		for _, h := range d.Need.Holders {
			f, err := a.holderFacts(ctx, h)
			if err != nil {
				return d, s, err
			}
			s.Holders[h] = f
		}
		if d.Need.Command {
			if err := a.renewBeforeCommand(ctx); err != nil {
				return d, s, err
			}
			a.gates.command = a.runGateCommand(ctx)
			a.gates.command.At = a.now()
			s.Command = a.gates.command
		}
		if d.Need.Cluster {
			a.gates.cluster = a.readCluster(ctx, s.Snapshot, d)
			s.Cluster = a.gates.cluster
		}
		if d.Need.Quarantine {
			full, err := a.quarantineFull(ctx, d.Policy)
			if err != nil {
				return d, s, err
			}
			s.DrainLookups.QuarantineFull = &full
		}
		if d.Need.Overbooking {
			over, why, err := a.overbooked(ctx, d.Policy, s.Observed().HeldLocks)
			if err != nil {
				return d, s, err
			}
			if !over {
				why = ""
			}
			s.DrainLookups.Overbooked = &why
		}
		if d.Need.Queue {
			// Where this node stands, from one LIST of the records: once
			// when it joins the queue, not again while it waits.
			mine, err := a.locks.summarize(ctx, d.Group)
			u, err := a.listed(d.Group, mine, err)
			switch {
			case err != nil:
				return d, s, err
			case u != nil:
				s.Unreadable[u.lease] = u.why
			default:
				s.Mine, s.Listed = a.queue.mine, true
			}
		}
		if d.Need.Kured {
			ok, why, err := a.holdKured(ctx)
			if err != nil {
				return d, s, err
			}
			refused := ""
			if !ok {
				refused = why
			}
			s.DrainLookups.KuredRefused = &refused
		}
		if d.Need.Job {
			s.Job = a.lookUpJob(ctx, s.RebootPending)
		}
		// The look-ups took time (a gate command may take seconds).
		s.Now = a.now()
		d = decide.Next(s.Snapshot)
	}
	if d.Unlisted {
		a.log.Info("the queue does not list this node's record as this agent last wrote it; writing it again", "group", d.Group.String())
	}
	if !d.Need.Empty() {
		return d, s, fmt.Errorf("the decision still needs %+v after looking it up", d.Need)
	}
	a.decision = d
	return d, s, nil
}

// listed keeps what a LIST of group's records made: this node's view of
// its queue, or the record of a newer agent that it could not read (which
// it returns). Any other error is returned.
func (a *Agent) listed(group lock.GroupRef, mine lock.Summary, err error) (*unreadableRecord, error) {
	var newer *lock.FormatError
	a.queue.mu.Lock()
	defer a.queue.mu.Unlock()
	switch {
	case errors.As(err, &newer):
		a.queue.unreadable = &unreadableRecord{lease: newer.Name, why: err.Error(), group: group, at: a.now()}
		return a.queue.unreadable, nil
	case err != nil:
		return nil, err
	}
	a.queue.unreadable = nil
	a.queue.mine, a.queue.mineGroup = &mine, group
	return nil, nil
}

// listAgain lists the records once more when a LIST found one in a newer
// format a staleAfter ago: until a LIST finds none the node stays out of
// its turn (and says so), without a step in between that lets it in.
func (a *Agent) listAgain(ctx context.Context) error {
	a.queue.mu.Lock()
	u := a.queue.unreadable
	if u != nil && u.group != a.decision.Group {
		// The node is in another group now: it lists that one's queue
		// when it joins it.
		a.queue.unreadable, u = nil, nil
	}
	a.queue.mu.Unlock()
	if u == nil || a.now().Sub(u.at) < a.cfg.Queue.StaleAfter() {
		return nil
	}
	mine, err := a.locks.summarize(ctx, u.group)
	_, err = a.listed(u.group, mine, err)
	return err
}

// holderFacts tells whether a lock's holder still counts: its record and
// whether its Node exists, read from the API at most once a heartbeat per
// holder (the Node only when the record is not live). Only an agent that may
// take a lock over asks, and only near the head of its queue.
func (a *Agent) holderFacts(ctx context.Context, holder string) (lock.HolderFacts, error) {
	if holder == "" {
		return lock.HolderFacts{}, nil
	}
	now := a.now()
	if c, ok := a.locks.holders[holder]; ok && now.Sub(c.at) < a.cfg.Queue.Heartbeat {
		return c.facts, nil
	}
	var f lock.HolderFacts
	r, err := a.records.get(ctx, holder)
	if lock.IsFormatError(err) {
		// A newer agent holds the lock: it keeps it, as a live one does.
		f.NodeExists = true
		a.locks.holders[holder] = holderCheck{facts: f, at: now}
		return f, nil
	}
	if err != nil {
		return f, fmt.Errorf("reading the record of %s, holder of the lock: %w", holder, err)
	}
	f.Record = r
	if r != nil && r.Live(now, a.cfg.Queue.StaleAfter()) {
		f.NodeExists = true // does not matter: a live holder keeps its lock
	} else {
		_, err := a.kube.CoreV1().Nodes().Get(ctx, holder, metav1.GetOptions{})
		switch {
		case err == nil:
			f.NodeExists = true
		case apierrors.IsNotFound(err):
			f.NodeExists = false
		default:
			return f, fmt.Errorf("reading node %s, holder of the lock: %w", holder, err)
		}
	}
	a.locks.holders[holder] = holderCheck{facts: f, at: now}
	return f, nil
}

type holderCheck struct {
	facts lock.HolderFacts
	at    time.Time
}

// renewBeforeCommand renews the node's record before gates.command runs,
// when its last renewal is a heartbeat old or more: the command may take
// two heartbeats, with none beaten meanwhile, and a node that came from
// far back (where it renews every other heartbeat) straight to the head
// would otherwise reach four heartbeats, stale to the nodes behind it.
func (a *Agent) renewBeforeCommand(ctx context.Context) error {
	base := a.myRecordLease()
	if base == nil {
		return nil
	}
	r := lock.RecordFromLease(base)
	if a.now().Sub(r.Heartbeat) < a.cfg.Queue.Heartbeat {
		return nil
	}
	r.Heartbeat = a.now()
	return a.records.put(ctx, base, r)
}

// runGateCommand runs gates.command.
func (a *Agent) runGateCommand(ctx context.Context) *decide.CommandResult {
	r := gates.Command(ctx, a.cfg.Gates.Command, a.cfg.CommandDeadline())
	if !r.OK {
		a.log.Info("gate command blocks", "reason", r.Reason)
	}
	return &r
}

// readCluster reads what the cluster-wide gates of the node's policy need.
// What cannot be read closes its gate with the reason; the agent goes on
// beating meanwhile.
func (a *Agent) readCluster(ctx context.Context, s decide.Snapshot, d decide.Decision) *decide.ClusterFacts {
	spec := d.Policy.Spec
	c := &decide.ClusterFacts{For: decide.ClusterKey(d), At: a.now()}
	var err error
	if spec.Health.MaxUnavailable != nil {
		if c.Nodes, err = gates.Nodes(ctx, a.kube, false, s.Policies); err != nil {
			c.NodesErr = err.Error()
		}
	}
	if spec.Health.WorkloadsRecovered {
		if c.Workloads, err = gates.Workloads(ctx, a.kube, decide.Disrupted(s, d)); err != nil {
			c.WorkloadsErr = err.Error()
		}
	}
	if p := spec.Blockers.Prometheus; p != nil {
		if auth, err := remoteAuth(a.cfg.Prometheus.Endpoints, "prometheus.endpoints", p.URL); err != nil {
			c.Prometheus = &decide.PrometheusResult{Err: "spec.blockers.prometheus.url: " + err.Error()}
		} else {
			c.Prometheus = gates.Prometheus(ctx, a.gates.http, auth, p)
		}
	}
	if b := spec.Blockers.Alertmanager; b != nil && spec.Alertmanager != nil {
		if client, err := a.alertmanagerClient(spec.Alertmanager); err != nil {
			c.Alertmanager = &decide.PrometheusResult{Err: err.Error()}
		} else {
			c.Alertmanager = gates.Alertmanager(ctx, client, b)
		}
	}
	return c
}

// quarantineFull counts, on a fresh read of the Nodes, the other nodes of
// the policy that are quarantined; it says why no more may be, or "". A
// node counts only if it is cordoned, its mark names the policy, and the
// policy is its own (resolved as its agent resolves it, from the same
// policies): any node can write the mark on itself, under any policy's
// name, and a compromised one would otherwise use up another policy's
// places, so that the nodes of that policy whose drain times out keep
// their locks. A node holds at most one place, of its own policy's cap.
func (a *Agent) quarantineFull(ctx context.Context, p policy.Effective) (string, error) {
	list, err := a.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("counting the quarantined nodes: %w", err)
	}
	policies := a.policies()
	var names []string
	for _, n := range list.Items {
		if n.Name == a.node || n.Annotations[nodemarks.AnnotationQuarantined] != p.Name || !n.Spec.Unschedulable {
			continue
		}
		if policy.Resolve(policies, n.Labels).Name != p.Name {
			continue
		}
		names = append(names, n.Name)
	}
	if limit := p.Spec.Drain.Quarantine.QuarantineCap(); len(names) >= limit {
		return fmt.Sprintf("%d of %d nodes of policy %s quarantined already (%s)", len(names), limit, p.Name, strings.Join(names, ", ")), nil
	}
	return "", nil
}

// overbooked checks, on a fresh read of the policy's locks and the Nodes,
// that taking this node out keeps the policy within maxUnavailable.
func (a *Agent) overbooked(ctx context.Context, p policy.Effective, held []string) (bool, string, error) {
	if p.Spec.Health.MaxUnavailable == nil || len(held) == 0 {
		return false, "", nil
	}
	leases, err := a.locks.all(ctx)
	if err != nil {
		return false, "", err
	}
	nodes, err := gates.Nodes(ctx, a.kube, true, a.policies())
	if err != nil {
		return false, "", err
	}
	over, why := lock.Overbooked(a.node, p, leases, nodes)
	return over, why, nil
}
