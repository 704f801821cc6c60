// Package nodecmd builds the command tree of `kustodian`, the binary that
// runs on each node's host.
package nodecmd

import (
	"github.com/spf13/cobra"

	"github.com/kustodian/kustodian/internal/version"
)

// NewRoot returns the `kustodian` root command.
func NewRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "kustodian",
		Short: "Safe in-place maintenance of Kubernetes nodes, one node at a time",
		Long: `kustodian runs on a node's host. When a maintenance script creates the request
file (/var/maintenance-required), the agent waits for the cluster-wide lock,
cordons and drains the node, creates /var/maintenance-in-progress, and gives the
node back to the cluster once the script removes the request.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newAgentCommand(), newRunCommand(), newCredentialsCommand(), newConfigCommand(), newJobExecCommand(), newRebootCommand(), newRebootGateCommand(), newDoctorCommand(), newPatchCommand(), version.NewCommand("kustodian"))
	return root
}
