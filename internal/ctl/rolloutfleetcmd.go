package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kustodian/kustodian/internal/fleet"
	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"
)

// The commands of a fleet rollout (rolloutfleet.go drives it): create
// --fleet, rollout status over several clusters and its table, and
// steering every copy.

// fleetLine says where a fleet rollout stands, in one line; with now, the
// ETA says how far off it is.
func fleetLine(fr fleetRollout, now time.Time) string {
	if fr.fl == nil {
		return ""
	}
	var line string
	switch m := fr.move; {
	case m.Done:
		line = fmt.Sprintf("complete: every ring (%d) done", len(fr.fl.Rings))
	case m.Halted != "":
		line = fmt.Sprintf("HALTED at ring %s: %s", fr.fl.Rings[m.Ring].Name, m.Halted)
	default:
		line = fmt.Sprintf("ring %s (%d of %d)", fr.fl.Rings[m.Ring].Name, m.Ring+1, len(fr.fl.Rings))
		if len(m.Create) > 0 {
			line += ": submitting to " + strings.Join(m.Create, ", ")
		}
		if len(m.Waiting) > 0 {
			line += ": " + strings.Join(m.Waiting, "; ")
		}
	}
	var ok, all int
	for _, cr := range fr.clusters {
		if cr.view != nil {
			ok += cr.view.summary.Counts.Succeeded
			all += cr.view.summary.Counts.Selected
		}
	}
	line += fmt.Sprintf("; %d/%d nodes succeeded in the clusters submitted", ok, all)
	if !fr.move.Done && fr.move.Halted == "" {
		switch {
		case fr.etaKnown && now.IsZero():
			line += fmt.Sprintf("; ETA %s UTC", fr.eta.UTC().Format("2006-01-02 15:04"))
		case fr.etaKnown:
			line += fmt.Sprintf("; ETA %s UTC (in %s)", fr.eta.UTC().Format("2006-01-02 15:04"), duration.HumanDuration(max(fr.eta.Sub(now), time.Second)))
		default:
			line += "; no ETA (a cluster cannot be read or planned)"
		}
	}
	return line
}

// printFleetRollout prints a fleet rollout: a line per cluster, the
// fleet's line, then every cluster's nodes with CLUSTER first.
func printFleetRollout(w io.Writer, fr fleetRollout, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tRING\tREVISION\tSTAGE\tPROGRESS")
	for _, cr := range fr.clusters {
		switch {
		case cr.Err != nil:
			fmt.Fprintf(tw, "%s\t%s\t%s\n", cr.Context, orDash(cr.ring), notRead(cr.Err))
		case cr.Conflict != "":
			fmt.Fprintf(tw, "%s\t%s\t%s\n", cr.Context, orDash(cr.ring), cr.Conflict)
		case cr.view == nil:
			fmt.Fprintf(tw, "%s\t%s\t-\t-\tnot submitted yet\n", cr.Context, orDash(cr.ring))
		default:
			v := cr.view
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d of %d\t%s\n", cr.Context, orDash(cr.ring), v.summary.Revision, v.summary.Stage+1, len(rollout.StagesOf(v.r.Spec)), cr.Says)
		}
	}
	tw.Flush()
	if line := fleetLine(fr, now); line != "" {
		fmt.Fprintf(w, "\nfleet %s: %s\n", fr.fl.Metadata.Name, line)
		for _, p := range fr.move.Passed {
			fmt.Fprintf(w, "fleet %s: %s\n", fr.fl.Metadata.Name, p)
		}
	}
	var tables []clusterTable
	for _, cr := range fr.clusters {
		if cr.view == nil || len(cr.view.rows) == 0 {
			continue
		}
		var buf rawTable
		printRolloutRows(&buf, *cr.view, now, true)
		tables = append(tables, clusterTable{cluster: cr.Context, text: buf.String()})
	}
	if len(tables) > 0 {
		fmt.Fprintln(w)
		mergeTables(w, tables, true)
	}
}

// eachRollout steers rollout name in the cluster the flags name, or, over
// several, in each that has it, one after the other (each within
// clusterTimeout, its lines prefixed with the cluster): one that has it
// not yet is said, one that cannot be changed is said and makes the
// command fail once every other was changed.
func (o *options) eachRollout(ctx context.Context, name string, steer func(*options) error) error {
	if !o.multi() {
		return steer(o)
	}
	ts, fl, err := o.targets()
	if err != nil {
		return err
	}
	failed, changed := 0, 0
	for _, t := range ts {
		c := *t.o
		c.timeout = clusterTimeout
		c.streams.Out = &prefixWriter{w: o.streams.Out, prefix: "cluster " + t.context + ": "}
		c.streams.ErrOut = &prefixWriter{w: o.streams.ErrOut, prefix: "cluster " + t.context + ": "}
		if fl != nil {
			// With --fleet, only the fleet's own copies.
			r, _, err := c.getRollout(ctx, name)
			if err == nil && r.Annotations[fleet.AnnotationFleet] != fl.Metadata.Name {
				fmt.Fprintf(o.streams.Out, "cluster %s: its maintenancerollout %s is not fleet %s's; left alone\n", t.context, name, fl.Metadata.Name)
				continue
			}
		}
		err := steer(&c)
		var missing *rolloutNotFound
		switch {
		case errors.As(err, &missing):
			fmt.Fprintf(o.streams.Out, "cluster %s: maintenancerollout %s not submitted yet\n", t.context, name)
		case err != nil:
			fmt.Fprintf(o.streams.ErrOut, "cluster %s: not changed: %s\n", t.context, oneLine(err))
			failed++
		default:
			changed++
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d clusters were not changed (said above); run it again once they answer", failed, len(ts))
	}
	if changed == 0 {
		return fmt.Errorf("maintenancerollout %s is in none of these clusters", name)
	}
	return nil
}

// createFleetRollout is rollout create --fleet: the rollout built and
// signed from the flags (or, without --script and --patch, the one the
// fleet's clusters have already), submitted ring by ring.
func (o *options) createFleetRollout(cmd *cobra.Command, name string, f *rolloutFlags, wait bool, timeout time.Duration) error {
	ts, fl, err := o.targets()
	if err != nil {
		return err
	}
	if fl == nil {
		return errors.New("rollout create over several clusters takes --fleet FILE: its rings give the order (--context A,B and --all-contexts have none)")
	}
	if o.dryRun != dryRunNone {
		return errors.New("--dry-run with --fleet: make and sign the rollout with --dry-run=client -o yaml against one cluster, then submit it with --fleet")
	}
	var want *rollout.MaintenanceRollout
	if f.script != "" || f.patch != "" {
		if want, err = f.build(o.namespace(), name); err != nil {
			return err
		}
		if err := f.sign(want); err != nil {
			return err
		}
		if want.Spec.Signature == "" {
			return errors.New("the rollout is not signed, and hosts run only signed rollouts: give --key or --signature")
		}
	}
	ctx := cmd.Context()
	if wait && timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	return o.driveFleet(ctx, ts, fl, name, want, wait, true)
}

// rolloutStatusClusters is rollout status over several clusters: a line
// per cluster and its nodes (-o json|yaml: each cluster's rollout), or,
// with --watch, a line at each change until it ends.
func (o *options) rolloutStatusClusters(ctx context.Context, name string, out *output, watch bool) error {
	ts, fl, err := o.targets()
	if err != nil {
		return err
	}
	if watch {
		return o.driveFleet(ctx, ts, fl, name, nil, true, false)
	}
	fr := o.readFleetRollout(ctx, ts, fl, name, nil)
	if fr.want == nil {
		return noRollout(fr)
	}
	if !out.Table() {
		rs := make([]clusterResult[map[string]any], len(fr.clusters))
		for i, cr := range fr.clusters {
			rs[i] = clusterResult[map[string]any]{clusterTarget: clusterTarget{context: cr.Context, ring: cr.ring}, err: cr.Err, value: map[string]any{"submitted": false}}
			if cr.obj != nil {
				rs[i].value = cr.obj.Object
			}
		}
		if err := printClusters(o.streams.Out, out, rollout.Kind, rs, func(m map[string]any) any { return m }, nil, ""); err != nil {
			return err
		}
		return fleetEnd(fr)
	}
	o.predict(ctx, ts, &fr)
	printFleetRollout(o.streams.Out, fr, time.Now())
	return fleetEnd(fr)
}
