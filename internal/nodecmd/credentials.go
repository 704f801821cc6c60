package nodecmd

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kustodian/kustodian/internal/identity"
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
}

func newCredentialsCommand() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "credentials",
		Short: "Show whose token the node's kubeconfig holds and when it expires",
		Long: `credentials reads the agent's kubeconfig (--kubeconfig, or the configuration's)
and says which Node its token is bound to and when it expires, without asking the
API server. -o json prints it for scripts: the Ansible role renews a kubeconfig
whose expiresInSeconds falls below kustodian_renew_before_days, or whose token
is bound to no Node.

Exit status: 0, a token bound to a Node and not expired; 2, a token the agent
cannot work with (bound to no Node, or expired), printed all the same; 1, the
configuration or the kubeconfig cannot be read.`,
		Example: `  kustodian credentials
  kustodian credentials -o json`,
		Args: cobra.NoArgs,
	}
	cf := addConfigFlags(cmd.Flags())
	showOnly(cmd, "kubeconfig")
	cmd.Flags().StringVarP(&output, "output", "o", "", "json or yaml: print it for scripts")
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
		tok, err := identity.BoundNode(rc)
		if err != nil {
			return fmt.Errorf("kubeconfig %s: %w", cfg.Kubeconfig, err)
		}
		c := Credentials{Kubeconfig: cfg.Kubeconfig, Node: tok.Node, Namespace: tok.Namespace, ServiceAccount: tok.ServiceAccount}
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
		when := "does not say when it expires"
		switch {
		case c.Expires == "":
		case left <= 0:
			when = "expired at " + c.Expires
		default:
			when = fmt.Sprintf("expires %s (in %s)", c.Expires, duration.HumanDuration(left))
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
