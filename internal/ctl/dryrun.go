package ctl

import (
	"fmt"
	"net/http"

	"github.com/spf13/cobra"
)

// dryRun is --dry-run, as kubectl has it: none (write), client (send no
// write; say what would be done) or server (send every write with
// dryRun=All: the API server validates and admits it, RBAC and admission
// policies included, and persists nothing).
type dryRun string

const (
	dryRunNone   dryRun = "none"
	dryRunClient dryRun = "client"
	dryRunServer dryRun = "server"
)

func (d *dryRun) String() string { return string(*d) }
func (d *dryRun) Type() string   { return "none|client|server" }
func (d *dryRun) Set(s string) error {
	switch dryRun(s) {
	case dryRunNone, dryRunClient, dryRunServer:
		*d = dryRun(s)
		return nil
	}
	return fmt.Errorf("%q is not one of none, client, server", s)
}

// suffix marks what a dry run printed, as kubectl does.
func (d dryRun) suffix() string {
	switch d {
	case dryRunClient:
		return " (dry run)"
	case dryRunServer:
		return " (server dry run)"
	}
	return ""
}

// addDryRun registers --dry-run on a command that writes. A bare --dry-run
// is client (it was a boolean before).
func addDryRun(cmd *cobra.Command, o *options, client string) {
	o.dryRun = dryRunNone
	f := cmd.Flags().VarPF(&o.dryRun, "dry-run", "", "none, client ("+client+") or server (send every write with dryRun=All: the API server checks it, RBAC and admission included, and keeps nothing)")
	f.NoOptDefVal = string(dryRunClient)
	_ = cmd.RegisterFlagCompletionFunc("dry-run", cobra.FixedCompletions([]string{"none", "client", "server"}, cobra.ShellCompDirectiveNoFileComp))
}

// serverDryRun sends every write with dryRun=All; reads (GET, and the
// watches that are GETs) go as they are.
type serverDryRun struct{ next http.RoundTripper }

func (t serverDryRun) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return t.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	q := req.URL.Query()
	q.Set("dryRun", "All")
	req.URL.RawQuery = q.Encode()
	return t.next.RoundTrip(req)
}

// refuseAllNamespaces takes kubectl's -A/--all-namespaces to say what it
// would mean here: Kustodian's state lives in one namespace.
func refuseAllNamespaces(cmd *cobra.Command) {
	var all bool
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "")
	_ = cmd.Flags().MarkHidden("all-namespaces")
	run := cmd.RunE
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if all {
			return fmt.Errorf("-A/--all-namespaces: an installation of Kustodian lives in one namespace; name it with -n (default %s). --all includes Idle nodes", DefaultNamespace)
		}
		return run(c, args)
	}
}
