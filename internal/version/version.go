// Package version holds the build's version, set by the linker
// (-X github.com/kustodian/kustodian/internal/version.Version=...), and the
// `version` command both binaries share.
package version

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"
)

// Set by -ldflags at build time; see the Makefile.
var (
	Version = "v0.0.0-dev"
	Commit  = "unknown"
	Date    = "unknown"
)

// String is the one-line version shown by `version` and in logs.
func String(binary string) string {
	return fmt.Sprintf("%s %s (commit %s, built %s, %s %s/%s)",
		binary, Version, Commit, Date, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// NewCommand returns the `version` subcommand for the named binary.
func NewCommand(binary string) *cobra.Command {
	var short bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of " + binary,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if short {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), Version)
				return err
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), String(binary))
			return err
		},
	}
	cmd.Flags().BoolVar(&short, "short", false, "print only the version number")
	return cmd
}
