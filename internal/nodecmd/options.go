package nodecmd

import (
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/kustodian/kustodian/internal/agentopts"
)

// configFlags are a command's agent options (--config and every option of
// agentopts.Options).
type configFlags struct{ *agentopts.Flags }

// addConfigFlags registers --config and every option's flag.
func addConfigFlags(fs *pflag.FlagSet) *configFlags {
	return &configFlags{agentopts.AddFlags(fs)}
}

// showOnly lists in the command's help, of the agent's options, only
// those it reads (and --config); the others are still accepted, as in the
// configuration file, and `kustodian agent --help` lists them all.
func showOnly(cmd *cobra.Command, names ...string) {
	show := map[string]bool{"config": true}
	for _, n := range names {
		if cmd.Flags().Lookup(n) == nil {
			panic("showOnly: no option --" + n) // a programming error, caught by the tests
		}
		show[n] = true
	}
	for _, o := range agentopts.Options {
		if !show[o.Flag] {
			_ = cmd.Flags().MarkHidden(o.Flag)
		}
	}
	cmd.Long += "\n\nIt reads the agent's configuration (--config): every option of it is accepted as a flag\nhere too (kustodian agent --help lists them)."
}
