package ctl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kustodian/kustodian/internal/suggest"
)

// The command line's own errors, said as the command's usage says its
// arguments (kustodian-ctl release NODE), before anything asks the API
// server.

// oneArg accepts exactly one argument, called what in the usage (NODE,
// NAME).
func oneArg(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch len(args) {
		case 1:
			return nil
		case 0:
			return fmt.Errorf("%s needs %s: %s", cmd.CommandPath(), what, usageLine(cmd))
		}
		return fmt.Errorf("%s takes one %s, got %d (%s): %s", cmd.CommandPath(), what, len(args), strings.Join(args, " "), usageLine(cmd))
	}
}

// atMostOneArg accepts no argument or one, called what in the usage.
func atMostOneArg(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) <= 1 {
			return nil
		}
		return fmt.Errorf("%s takes at most one %s, got %d (%s): %s", cmd.CommandPath(), what, len(args), strings.Join(args, " "), usageLine(cmd))
	}
}

// noArgs accepts no argument.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	return fmt.Errorf("%s takes no arguments, got %q: %s", cmd.CommandPath(), strings.Join(args, " "), usageLine(cmd))
}

func usageLine(cmd *cobra.Command) string {
	return strings.TrimSuffix(cmd.UseLine(), " [flags]")
}

// suggestFlag says, of a flag the command does not know, which of its
// flags may have been meant.
func suggestFlag(cmd *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return err
	}
	var names []string
	visit := func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	}
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	if s := suggest.Closest(name, names); s != "" {
		return fmt.Errorf("%s: %w; did you mean --%s?", cmd.CommandPath(), err, s)
	}
	return fmt.Errorf("%s: %w (%s --help lists its flags)", cmd.CommandPath(), err, cmd.CommandPath())
}

// errNoKubeconfig is what client-go's "no configuration has been provided,
// try setting KUBERNETES_MASTER" means for a user of this CLI.
var errNoKubeconfig = errors.New("no kubeconfig found: pass --kubeconfig FILE, set KUBECONFIG, or create ~/.kube/config (as for kubectl); or name the API server with -s URL and --token")

// kubeconfigError explains a kubeconfig that cannot be used.
func kubeconfigError(err error) error {
	if clientcmd.IsEmptyConfig(err) {
		return errNoKubeconfig
	}
	return fmt.Errorf("kubeconfig: %w", err)
}
