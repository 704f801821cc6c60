package ctl

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/kustodian/kustodian/internal/status"
)

// ReportRow is one package a node changed in a rollout (a node that
// changed none, or a script rollout's node, has one row without a
// package): the evidence a change ticket asks for.
type ReportRow struct {
	Node     string `json:"node"`
	Stage    int    `json:"stage"`
	State    string `json:"state"`
	Started  string `json:"started,omitempty"`
	Finished string `json:"finished,omitempty"`
	Rebooted bool   `json:"rebooted"`
	Package  string `json:"package,omitempty"`
	From     string `json:"from,omitempty"`
	To       string `json:"to,omitempty"`
	// Incomplete: the node changed more than its entry lists (its host's
	// job directory has the whole list).
	Incomplete bool `json:"incomplete,omitempty"`
}

// Report is a rollout's whole report.
type Report struct {
	Kind     string `json:"kind"`
	Rollout  string `json:"rollout"`
	Revision string `json:"revision"`
	// Set is a patch campaign's set: the node that resolved it, when it
	// was proven, its packages.
	Set   *rollout.PatchStatus `json:"set,omitempty"`
	Items []ReportRow          `json:"items"`
}

// reportOf is r's report: every entry of its revision, and in a patch
// campaign every package each node changed.
func reportOf(r *rollout.MaintenanceRollout) Report {
	rev := rollout.Revision(r.Namespace, r.Name, r.Spec)
	rep := Report{Kind: "RolloutReport", Rollout: r.Name, Revision: rev, Items: []ReportRow{}}
	var set []rollout.PackageChange
	if r.Spec.Patch != nil && r.Status.Patch.ClaimedBy(r.Spec.Signature) != "" {
		rep.Set = r.Status.Patch
		set = r.Status.Patch.Packages
	}
	for _, e := range r.Status.Nodes {
		if e.Revision != rev {
			continue
		}
		row := ReportRow{Node: e.Name, Stage: e.Stage + 1, State: e.State}
		if e.Started != nil {
			row.Started = e.Started.UTC().Format(time.RFC3339)
		}
		if e.Finished != nil {
			row.Finished = e.Finished.UTC().Format(time.RFC3339)
		}
		if e.Changed == nil {
			rep.Items = append(rep.Items, row)
			continue
		}
		row.Rebooted = e.Rebooted
		changes, complete := rollout.ChangesOf(set, e.NodePatch)
		row.Incomplete = !complete
		if len(changes) == 0 {
			rep.Items = append(rep.Items, row)
		}
		for _, c := range changes {
			row.Package, row.From, row.To = c.Name, c.From, c.To
			rep.Items = append(rep.Items, row)
		}
	}
	return rep
}

func newRolloutReportCommand(o *options) *cobra.Command {
	var out *output
	cmd := &cobra.Command{
		Use:   "report NAME",
		Short: "Report what a rollout did on each node: every package a patch campaign changed, the reboots, the times",
		Long: `report lists, for every node that took the rollout's revision, its state, when it
was queued and when it finished, whether it rebooted, and, in a patch campaign,
every package it changed (name, from, to), one row each: the evidence a change
ticket asks for. -o csv prints the rows as CSV (with a header line unless
--no-headers), -o json|yaml the whole report with the campaign's set, -o html|svg
a timeline: one self-contained file, a row per node.`,
		Example: `  kustodian-ctl rollout report cve-2026-1234
  kustodian-ctl rollout report cve-2026-1234 -o csv > cve-2026-1234.csv`,
		Args: oneArg("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			csvOut := out.Format == "csv"
			if !csvOut {
				if err := out.Check(); err != nil {
					return err
				}
			}
			if out.Picture() {
				c, err := o.rolloutPicture(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return out.Draw(o.streams.Out, c)
			}
			r, _, err := o.getRollout(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			rep := reportOf(r)
			switch {
			case csvOut:
				return printReportCSV(o.streams.Out, rep, !out.NoHeaders)
			case !out.Table():
				return out.Print(o.streams.Out, rep, []string{"maintenancerollout.kustodian.io/" + r.Name})
			}
			printReport(o.streams.Out, rep, !out.NoHeaders)
			return nil
		},
	}
	out = addOutput(cmd, false)
	addPictures(cmd, out)
	f := cmd.Flags().Lookup("output")
	f.Usage = "output format: csv, " + f.Usage[len("output format: "):]
	return cmd
}

var reportHeader = []string{"NODE", "STAGE", "STATE", "STARTED", "FINISHED", "REBOOTED", "PACKAGE", "FROM", "TO"}

func (r ReportRow) fields() []string {
	pkg := r.Package
	if r.Incomplete && pkg != "" {
		pkg += " (and more: see the host)"
	}
	return []string{r.Node, strconv.Itoa(r.Stage), r.State, r.Started, r.Finished, strconv.FormatBool(r.Rebooted), pkg, r.From, r.To}
}

func printReport(w io.Writer, rep Report, headers bool) {
	if s := rep.Set; s != nil {
		when := "not proven yet"
		if s.ResolvedAt != nil {
			when = "proven " + s.ResolvedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "maintenancerollout %s, revision %s: the set of %d packages resolved on %s, %s\n", rep.Rollout, rep.Revision, len(s.Packages), status.Printable(s.ResolvedOn), when)
	}
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	if headers {
		fmt.Fprintln(tw, strings.Join(reportHeader, "\t"))
	}
	for _, r := range rep.Items {
		f := r.fields()
		for i := range f {
			if f[i] == "" {
				f[i] = "-"
			}
			f[i] = status.Printable(f[i])
		}
		fmt.Fprintln(tw, strings.Join(f, "\t"))
	}
	tw.Flush()
}

func printReportCSV(w io.Writer, rep Report, headers bool) error {
	cw := csv.NewWriter(w)
	if headers {
		if err := cw.Write(reportHeader); err != nil {
			return err
		}
	}
	for _, r := range rep.Items {
		if err := cw.Write(r.fields()); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}
