// Package ctl builds the command tree of `kustodian-ctl`, the admin CLI.
// It must never import D-Bus or systemd code: it runs on admins' machines.
package ctl

import (
	"github.com/spf13/cobra"

	"github.com/kustodian/kustodian/internal/version"
)

// NewRoot returns the `kustodian-ctl` root command.
func NewRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "kustodian-ctl",
		Short: "See and steer Kustodian node maintenance in a cluster",
		Long: `kustodian-ctl shows which node holds the maintenance lock, which nodes wait,
and lets an admin pause the rollout or release a failed node.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(version.NewCommand("kustodian-ctl"))
	return root
}
