package ctl

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/policy"
	"github.com/kustodian/kustodian/internal/status"
)

// MaintenancePlan is the documented output of `plan -o json|yaml`.
type MaintenancePlan struct {
	APIVersion string    `json:"apiVersion"`
	Kind       string    `json:"kind"`
	Namespace  string    `json:"namespace"`
	Time       time.Time `json:"time"`
	// Start is when the plan begins; End when its last node is predicted
	// to be back.
	Start           time.Time `json:"start"`
	End             time.Time `json:"end"`
	MakespanSeconds int64     `json:"makespanSeconds"`
	Paused          bool      `json:"paused"`
	// HandoffSeconds is the queue's latency from one node's release to the
	// next one's grant, read from the history.
	HandoffSeconds float64      `json:"handoffSeconds"`
	Windows        []PlanWindow `json:"windows,omitempty"`
	Items          []PlanItem   `json:"items"`
	Summary        string       `json:"summary"`
}

// PlanItem is one node of a plan.
type PlanItem struct {
	// Order is the place in which it is predicted to start (0: not placed).
	Order  int        `json:"order"`
	Node   string     `json:"node"`
	State  lock.State `json:"state"`
	Policy string     `json:"policy"`
	Group  string     `json:"group"`
	Lock   string     `json:"lock,omitempty"`
	Start  *time.Time `json:"start,omitempty"`
	End    *time.Time `json:"end,omitempty"`
	// EstimateSeconds is how long it is predicted to hold its lock, from
	// EstimateSource: node (its own last maintenances), policy (those of
	// its policy's nodes) or default (nothing known), of EstimateSamples.
	EstimateSeconds int64  `json:"estimateSeconds"`
	EstimateSource  string `json:"estimateSource,omitempty"`
	EstimateSamples int    `json:"estimateSamples,omitempty"`
	// DeferredBy is the gate that makes it start later than its slot frees:
	// window, spacing, or start (the plan's --start).
	DeferredBy string `json:"deferredBy,omitempty"`
	// Overdue: in maintenance longer than its estimate (its end is then
	// the plan's time: not known). Later: its times are the earliest it
	// can go, as a node before it is overdue. Stuck: its maintenance
	// failed and it keeps its lock until an admin releases it (no end).
	Overdue bool                 `json:"overdue,omitempty"`
	Later   bool                 `json:"later,omitempty"`
	Stuck   bool                 `json:"stuck,omitempty"`
	Gates   []status.PlannedGate `json:"gates,omitempty"`
	// RefusedEvictions are the pods on it whose eviction the API server
	// refuses now (a dry run of the Eviction API).
	RefusedEvictions []RefusedEviction `json:"refusedEvictions,omitempty"`
	// NotPlaced says why it has no predicted start.
	NotPlaced string `json:"notPlaced,omitempty"`
}

// PlanWindow says whether a policy's nodes end inside the window the plan
// starts in.
type PlanWindow struct {
	Policy    string    `json:"policy"`
	Closes    time.Time `json:"closes"`
	Fits      bool      `json:"fits"`
	FirstLate string    `json:"firstLate,omitempty"`
	// OverSeconds is how long after the close FirstLate ends.
	OverSeconds int64 `json:"overSeconds,omitempty"`
	Late        int   `json:"late,omitempty"`
}

type planFlags struct {
	selector, policy, start string
}

func newPlanCommand(o *options) *cobra.Command {
	var f planFlags
	var out *output
	cmd := &cobra.Command{
		Use:   "plan [NODE... | -l SELECTOR] [--policy P] [--start TIME]",
		Short: "Predict a rollout before it starts: order, gates, PDB-blocked pods, start and end of each node, and whether it fits its window",
		Long: `plan is a dry run that touches nothing. Without arguments it plans the
maintenances asked for already (the nodes in maintenance and the queue); NODEs,
-l SELECTOR or --policy P add those nodes behind the queue, as a rollout of them
would (--policy P alone: every node of P; with nodes: only those of P).

For each node, in the order it is predicted to start: the gates that would hold
it now and when each opens (window, spacing, pause, a hold, and what its agent
last saw), the pods on it whose eviction the API server refuses now (a dry run
of the Eviction API, so a PodDisruptionBudget's real answer), its group and the
lock it would take, and a predicted start and end. Each node's time is the
median of its last maintenances (its history), else of its policy's nodes, else
10 minutes; the table says which. Then the predicted end, and for a policy with
windows whether the rollout ends inside the window it starts in, and if not the
first node that will not fit and by how much.

-o wide adds each node's policy and the gate that defers its start;
-o json|yaml prints a MaintenancePlan; -o name prints node/NAME in order.`,
		Example: `  kustodian-ctl plan
  kustodian-ctl plan --policy workers --start 2026-11-28T22:00:00Z
  kustodian-ctl plan -l topology.kubernetes.io/zone=eu-1a -o json`,
		RunE: func(cmd *cobra.Command, nodes []string) error {
			if err := out.Check(); err != nil {
				return err
			}
			// What the command line gets wrong is said before the
			// cluster is read.
			if err := f.check(nodes); err != nil {
				return err
			}
			if _, err := parseStart(f.start, time.Now()); err != nil {
				return err
			}
			if o.multi() {
				return o.planClusters(cmd.Context(), out, f, nodes)
			}
			p, in, err := makePlan(cmd.Context(), o, f, nodes)
			if err != nil {
				return err
			}
			if out.Picture() {
				return out.Draw(o.streams.Out, planChart(p, in.Policies))
			}
			if printed, err := printList(out, o.streams.Out, p, p.Items, func(it PlanItem) string { return it.Node }); printed {
				return err
			}
			return printPlan(o.streams.Out, p, out.Wide(), !out.NoHeaders)
		},
	}
	out = addOutput(cmd, true)
	addPictures(cmd, out)
	cmd.Flags().StringVarP(&f.selector, "selector", "l", "", "plan the nodes whose labels match this selector (as kubectl's -l)")
	cmd.Flags().StringVar(&f.policy, "policy", "", "plan the nodes of this MaintenancePolicy (alone: all of them; with nodes or -l: only those of it)")
	cmd.Flags().StringVar(&f.start, "start", "", "when the rollout begins: RFC 3339 (2026-11-28T22:00:00Z), or HH:MM for its next occurrence in local time (default: now)")
	cmd.ValidArgsFunction = o.completeNodes
	refuseAllNamespaces(cmd)
	return manyClusters(cmd)
}

// planClusters is plan over several clusters: each cluster's plan, with
// CLUSTER first, and each one's summary line.
func (o *options) planClusters(ctx context.Context, out *output, f planFlags, nodes []string) error {
	if len(nodes) > 0 {
		return fmt.Errorf("plan NODE... over several clusters: a node is one cluster's; give -l SELECTOR or --policy P, or name the cluster with --context")
	}
	ts, _, err := o.targets()
	if err != nil {
		return err
	}
	rs := eachCluster(ctx, ts, func(ctx context.Context, c *options) (MaintenancePlan, error) {
		p, _, err := makePlan(ctx, c, f, nil)
		if err != nil {
			return p, err
		}
		return p, sortRows(out, p.Items)
	})
	return printClusters(o.streams.Out, out, "MaintenancePlan", rs, func(p MaintenancePlan) any { return p },
		func(w io.Writer, p MaintenancePlan) error {
			return printPlan(w, p, out.Wide(), !out.NoHeaders)
		}, "")
}

// parseStart reads --start: "" is now, RFC 3339, or HH:MM next in local
// time.
func parseStart(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return now, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if c, err := time.ParseInLocation("15:04", s, now.Location()); err == nil {
		t := time.Date(now.Year(), now.Month(), now.Day(), c.Hour(), c.Minute(), 0, 0, now.Location())
		if t.Before(now) {
			t = t.AddDate(0, 0, 1)
		}
		return t, nil
	}
	return time.Time{}, fmt.Errorf("--start %q: give a time as 2026-11-28T22:00:00Z (RFC 3339) or 22:00 (its next occurrence, local time)", s)
}

// makePlan reads the cluster and predicts.
func makePlan(ctx context.Context, o *options, f planFlags, named []string) (MaintenancePlan, status.Inputs, error) {
	r, err := o.reader()
	if err != nil {
		return MaintenancePlan{}, status.Inputs{}, err
	}
	in, err := r.Inputs(ctx)
	if err != nil {
		return MaintenancePlan{}, in, err
	}
	if in.PoliciesErr != nil {
		return MaintenancePlan{}, in, in.PoliciesErr
	}
	p, err := buildPlan(in, f, named, func(node string) ([]RefusedEviction, error) {
		return refusedEvictions(ctx, r.Client, node)
	})
	return p, in, err
}

// check refuses nodes named beside -l, and a selector that does not
// parse.
func (f planFlags) check(named []string) error {
	if len(named) > 0 && f.selector != "" {
		return fmt.Errorf("-l %q and nodes named (%s): give one or the other", f.selector, strings.Join(named, " "))
	}
	if _, err := labels.Parse(f.selector); err != nil {
		return fmt.Errorf("-l %q: %w", f.selector, err)
	}
	return nil
}

// planNodes are the nodes a plan adds behind the queue: those named, or
// those -l and --policy select (by name); and each node's policy by its
// labels.
func planNodes(in status.Inputs, f planFlags, named []string) (add []string, policyOf map[string]string, err error) {
	if err := f.check(named); err != nil {
		return nil, nil, err
	}
	sel, _ := labels.Parse(f.selector) // f.check parsed it
	if f.policy != "" && f.policy != policy.DefaultName && !slices.ContainsFunc(in.Policies, func(p *policy.MaintenancePolicy) bool { return p.Name == f.policy }) {
		return nil, nil, fmt.Errorf("--policy %s: no such MaintenancePolicy in namespace %s (kustodian-ctl policy lists them)", f.policy, in.Namespace)
	}
	policyOf = map[string]string{}
	for _, n := range in.Nodes {
		policyOf[n.Name] = policy.Resolve(in.Policies, n.Labels).Name
	}
	for _, name := range named {
		if _, ok := policyOf[name]; !ok {
			return nil, nil, fmt.Errorf("node %q not found", name)
		}
		if f.policy == "" || policyOf[name] == f.policy {
			add = append(add, name)
		}
	}
	if len(named) == 0 && (f.selector != "" || f.policy != "") {
		for _, n := range in.Nodes {
			if sel.Matches(labels.Set(n.Labels)) && (f.policy == "" || policyOf[n.Name] == f.policy) {
				add = append(add, n.Name)
			}
		}
		sort.Strings(add)
		if len(add) == 0 {
			return nil, nil, fmt.Errorf("no node matches -l %q --policy %q", f.selector, f.policy)
		}
	}
	return add, policyOf, nil
}

// buildPlan predicts from what was read; refused asks the API server which
// evictions it refuses on a node.
func buildPlan(in status.Inputs, f planFlags, named []string, refused func(node string) ([]RefusedEviction, error)) (MaintenancePlan, error) {
	start, err := parseStart(f.start, in.Now)
	if err != nil {
		return MaintenancePlan{}, err
	}
	if start.Before(in.Now.Add(-time.Minute)) {
		return MaintenancePlan{}, fmt.Errorf("--start %s is in the past; give a later time, or leave it out to plan from now", f.start)
	}
	add, policyOf, err := planNodes(in, f, named)
	if err != nil {
		return MaintenancePlan{}, err
	}
	s := status.Build(in)
	fc := status.ForecastOf(in, s, add, start)
	// End and makespan are those of the nodes shown (--policy).
	p := MaintenancePlan{APIVersion: status.APIVersion, Kind: "MaintenancePlan", Namespace: in.Namespace, Time: in.Now,
		Start: fc.Schedule.Start, Paused: s.Paused, HandoffSeconds: fc.Handoff.Seconds(), Items: []PlanItem{}}
	order := 0
	for _, name := range fc.Order {
		fn := fc.Nodes[name]
		if f.policy != "" && fn.Policy != f.policy && policyOf[name] != f.policy {
			continue
		}
		it := PlanItem{Node: name, State: fn.State, Policy: fn.Policy, Group: fn.Group.String(), Gates: fn.Gates, NotPlaced: fn.Unplaced}
		if fn.Unplaced == "" {
			order++
			e := fn.Entry
			it.Order, it.Lock, it.DeferredBy = order, e.Lock, e.Deferred
			st := e.Start
			it.Start = &st
			if !e.Stuck {
				end := e.End
				it.End = &end
				if end.After(p.End) {
					p.End = end
				}
			}
			it.Overdue, it.Later, it.Stuck = e.Overdue, e.Later, e.Stuck
			it.EstimateSeconds, it.EstimateSource, it.EstimateSamples = seconds(e.Estimate.Duration), e.Estimate.Source, e.Estimate.Samples
		}
		if fn.State == lock.Idle || fn.State == lock.Waiting {
			if it.RefusedEvictions, err = refused(name); err != nil {
				return MaintenancePlan{}, err
			}
		}
		p.Items = append(p.Items, it)
	}
	if p.End.After(p.Start) {
		p.MakespanSeconds = seconds(p.End.Sub(p.Start))
	} else {
		p.End = p.Start // nothing ends after the start
	}
	var pols []string
	for pol := range fc.Fits {
		pols = append(pols, pol)
	}
	sort.Strings(pols)
	for _, pol := range pols {
		if f.policy != "" && pol != f.policy {
			continue
		}
		fit := fc.Fits[pol]
		if fit.Closes.IsZero() {
			continue
		}
		p.Windows = append(p.Windows, PlanWindow{Policy: pol, Closes: fit.Closes, Fits: fit.Fits, FirstLate: fit.FirstLate,
			OverSeconds: seconds(fit.Over), Late: fit.Late})
	}
	p.Summary = planSummary(p)
	return p, nil
}
