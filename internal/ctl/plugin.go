package ctl

import (
	"path/filepath"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// pluginMode tells whether the program runs as kubectl's plugin: kubectl
// runs kubectl-kustodian for `kubectl kustodian`.
func pluginMode(invokedAs string) bool {
	return strings.HasPrefix(filepath.Base(invokedAs), PluginName)
}

// Where a text names the command, not the field manager or a file.
var ctlName = regexp.MustCompile(`kustodian-ctl([^\w./-]|$)`)

const fieldManager = "field manager kustodian-ctl"

// asPlugin rewrites a help text or an error to name the command as the
// user typed it: "kubectl kustodian status", not "kustodian-ctl status".
func asPlugin(s string) string {
	s = strings.ReplaceAll(s, fieldManager, "\x00")
	s = ctlName.ReplaceAllString(s, "kubectl kustodian$1")
	return strings.ReplaceAll(s, "\x00", fieldManager)
}

// renameForPlugin rewrites every command's help and flags for plugin mode.
func renameForPlugin(cmd *cobra.Command) {
	cmd.Short, cmd.Long, cmd.Example = asPlugin(cmd.Short), asPlugin(cmd.Long), asPlugin(cmd.Example)
	rename := func(f *pflag.Flag) { f.Usage = asPlugin(f.Usage) }
	cmd.LocalFlags().VisitAll(rename)
	cmd.PersistentFlags().VisitAll(rename)
	for _, c := range cmd.Commands() {
		renameForPlugin(c)
	}
}

// ErrorLine is how the program reports err: prefixed with its name as the
// user typed it, and naming its commands so.
func ErrorLine(invokedAs string, err error) string {
	if pluginMode(invokedAs) {
		return "kubectl kustodian: " + asPlugin(err.Error())
	}
	return "kustodian-ctl: " + err.Error()
}
