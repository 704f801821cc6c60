package nodecmd

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kustodian/kustodian/internal/agentopts"
	"github.com/kustodian/kustodian/internal/config"
)

func newConfigCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Work with the agent's configuration file",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newConfigCheckCommand())
	return cmd
}

func newConfigCheckCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "check [FILE]",
		Short: "Check a configuration file without reaching the API server",
		Long: `check reads FILE (default ` + config.DefaultFile + `) as the agent would and
prints every problem at once, one line each: unknown keys (with the closest known
key), values of the wrong type, values the agent refuses, paths whose directory
does not exist on this host. Neither the environment (KUSTODIAN_*) nor the
cluster is read. Exit 0: the agent would accept the file; 1: it would not.

Use it before deploying a configuration: the Ansible role runs it as its
template's validate step, so a typo stops the deployment instead of showing at
the next maintenance.`,
		Example: `  kustodian config check
  kustodian config check /tmp/new-config.yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fs := pflag.NewFlagSet("check", pflag.ContinueOnError)
			cf := agentopts.AddFlags(fs)
			if len(args) == 1 {
				if err := fs.Set("config", args[0]); err != nil {
					return err
				}
			}
			_, problems, warnings := cf.Resolve(false)
			out := cmd.OutOrStdout()
			for _, w := range warnings {
				fmt.Fprintln(out, "warning: "+w)
			}
			for _, p := range problems {
				fmt.Fprintln(out, "error: "+p.Error())
			}
			if len(problems) > 0 {
				fmt.Fprintf(out, "%s: %d problem(s); the agent would refuse this configuration\n", cf.ConfigFile, len(problems))
				return ErrSilentExit1
			}
			fmt.Fprintf(out, "%s: OK\n", cf.ConfigFile)
			return nil
		},
	}
}
