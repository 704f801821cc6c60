package nodecmd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/identity"
	"github.com/kustodian/kustodian/internal/metrics"
)

// Credentials is the output of `kustodian credentials -o json`.
type Credentials struct {
	Kubeconfig     string `json:"kubeconfig"`
	Node           string `json:"node,omitempty"` // "" when the token is not bound to a Node
	Namespace      string `json:"namespace,omitempty"`
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// Expires is when the token expires (RFC 3339; "" when it does not say),
	// and ExpiresInSeconds how long from now (negative once expired).
	Expires          string `json:"expires,omitempty"`
	ExpiresInSeconds int64  `json:"expiresInSeconds,omitempty"`
	// RenewAt is when the node renews it (RFC 3339; "" when it cannot:
	// the token does not say when it was issued); Renewed, whether the
	// token in use is a renewal (in the state directory's token file).
	RenewAt string `json:"renewAt,omitempty"`
	Renewed bool   `json:"renewed,omitempty"`
}

func newCredentialsCommand() *cobra.Command {
	var output string
	var renew bool
	cmd := &cobra.Command{
		Use:   "credentials",
		Short: "Show whose token the node's kubeconfig holds and when it expires",
		Long: `credentials reads the agent's kubeconfig (--kubeconfig, or the configuration's)
and its renewal (the file token in the state directory), and says which Node the
token in use is bound to, when it expires and when the node renews it, without
asking the API server. -o json prints it for scripts.

The node renews its own token when a third of its lifetime is left: a
TokenRequest for its own ServiceAccount, bound to its own Node, for the same
lifetime (at most 90 days). The agent does so while it runs; --renew does it
now if it is due, and kustodian-renew.timer runs kustodian credentials --renew
every hour between the agent's runs.

Exit status: 0, a token bound to a Node and not expired; 2, a token the agent
cannot work with (bound to no Node, or expired), printed all the same; 1, the
configuration or the kubeconfig cannot be read, or a renewal failed.`,
		Example: `  kustodian credentials
  kustodian credentials -o json
  kustodian credentials --renew`,
		Args: cobra.NoArgs,
	}
	cf := addConfigFlags(cmd.Flags())
	showOnly(cmd, "kubeconfig")
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml: print it for scripts")
	cmd.Flags().BoolVar(&renew, "renew", false, "renew the token through the API server if it is due (a third of its lifetime left)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if output != "" && output != "json" && output != "yaml" {
			return fmt.Errorf("--output %q: use json or yaml (without -o: one line)", output)
		}
		cfg, err := cf.Load()
		if err != nil {
			return err
		}
		rc, err := loadKubeconfig(cfg.Kubeconfig)
		if err != nil {
			return err
		}
		file := identity.TokenFile(cfg.StateDir)
		tok, err := identity.UseRenewed(rc, file, false)
		if err != nil {
			return fmt.Errorf("kubeconfig %s: %w", cfg.Kubeconfig, err)
		}
		renewed := rc.BearerTokenFile == file
		if renew {
			before := tok.Raw
			if tok, err = renewIfDue(cmd.Context(), cmd.ErrOrStderr(), cfg, rc, tok); err != nil {
				return err
			}
			renewed = renewed || tok.Raw != before
		}
		c := Credentials{Kubeconfig: cfg.Kubeconfig, Node: tok.Node, Namespace: tok.Namespace, ServiceAccount: tok.ServiceAccount, Renewed: renewed}
		if at := tok.RenewAt(); !at.IsZero() {
			c.RenewAt = at.UTC().Format(time.RFC3339)
		}
		var left time.Duration
		if tok.Expires > 0 {
			exp := time.Unix(tok.Expires, 0).UTC()
			left = time.Until(exp)
			c.Expires, c.ExpiresInSeconds = exp.Format(time.RFC3339), int64(left.Seconds())
		}
		out := cmd.OutOrStdout()
		// Printed in every case, then a token the agent cannot work with
		// exits 2, as kustodian doctor's failures.
		unusable := c.Node == "" || (c.Expires != "" && left <= 0)
		if output != "" {
			if err := printAs(out, output, c); err != nil {
				return err
			}
			if unusable {
				return exitCode(2)
			}
			return nil
		}
		who := "a token not bound to a Node"
		if c.Node != "" {
			who = fmt.Sprintf("a token of %s/%s bound to node %s", c.Namespace, c.ServiceAccount, c.Node)
		}
		if c.Renewed {
			who += " (renewed: " + file + ")"
		}
		when := "does not say when it expires"
		switch {
		case c.Expires == "":
		case left <= 0:
			when = "expired at " + c.Expires
		default:
			when = fmt.Sprintf("expires %s (in %s)", c.Expires, duration.HumanDuration(left))
			if c.RenewAt != "" {
				when += ", renewed from " + c.RenewAt
			}
		}
		if _, err := fmt.Fprintf(out, "%s: %s; %s\n", c.Kubeconfig, who, when); err != nil {
			return err
		}
		if unusable {
			return exitCode(2)
		}
		return nil
	}
	return cmd
}

// renewIfDue renews tok when it is due, as the agent does, and counts the
// renewal in the metrics the agent keeps.
func renewIfDue(ctx context.Context, errOut io.Writer, cfg config.Agent, rc *rest.Config, tok identity.Token) (identity.Token, error) {
	at := tok.RenewAt()
	switch {
	case at.IsZero():
		return tok, fmt.Errorf("kubeconfig %s: its token is not a Node-bound one that says when it was issued; it cannot be renewed here (kustodian-ctl kubeconfig NODE)", cfg.Kubeconfig)
	case time.Now().Before(at):
		fmt.Fprintf(errOut, "the token is not due for renewal until %s\n", at.UTC().Format(time.RFC3339))
		return tok, nil
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return tok, fmt.Errorf("kubeconfig %s: %w", cfg.Kubeconfig, err)
	}
	n, err := identity.Renew(ctx, client, tok, identity.TokenFile(cfg.StateDir))
	result, expires := metrics.ResultSucceeded, n.ExpiresAt()
	if err != nil {
		result, expires = metrics.ResultFailed, tok.ExpiresAt()
	}
	if m, merr := metrics.Open(cfg.StateDir, cfg.MetricsTextfile()); m != nil {
		if merr == nil {
			merr = m.Update(func(d *metrics.Data) { d.TokenRenewed(result, expires) })
		}
		if merr != nil {
			fmt.Fprintf(errOut, "warning: metrics: %v\n", merr)
		}
	}
	if err != nil {
		return tok, err
	}
	fmt.Fprintf(errOut, "renewed the token of node %s: it expires %s\n", n.Node, expires.UTC().Format(time.RFC3339))
	return n, nil
}
