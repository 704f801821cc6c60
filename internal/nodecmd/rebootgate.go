package nodecmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/kustodian/kustodian/internal/login1"
)

// ErrSilentExit1 makes the binary exit 1 without printing it: the command
// has said why already (the reboot gate's "no").
var ErrSilentExit1 = errors.New("exit 1")

var errNoReboot = ErrSilentExit1

func newRebootGateCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reboot-gate",
		Short: "Exit 0 only when a reboot is needed and nothing forbids it (for Kured's --reboot-sentinel-command)",
		Long: `reboot-gate is meant for Kured's --reboot-sentinel-command, which Kured runs on the
host: it exits 0 only when the reboot sentinel exists, this node is not in a
Kustodian maintenance (no request file, no in-progress file), and no process
holds a logind block inhibitor on shutdown. Otherwise it says why and exits 1,
so Kured honours both Kustodian and every other inhibitor on the host.`,
		Args: cobra.NoArgs,
	}
	cf := addConfigFlags(cmd.Flags())
	showOnly(cmd, "request-file", "in-progress-file", "reboot-sentinel")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := cf.Load()
		if err != nil {
			return err
		}
		obs, err := cfg.Files().Observe()
		if err != nil {
			return err
		}
		out := cmd.OutOrStdout()
		switch {
		case !obs.RebootPending:
			fmt.Fprintf(out, "no reboot: %s does not exist\n", cfg.RebootSentinel)
			return errNoReboot
		case obs.Request != nil:
			fmt.Fprintf(out, "no reboot: maintenance is requested on this node (%s)\n", cfg.RequestFile)
			return errNoReboot
		case obs.InProgress:
			fmt.Fprintf(out, "no reboot: this node is in maintenance (%s)\n", cfg.InProgressFile)
			return errNoReboot
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 10*time.Second)
		defer cancel()
		m, err := login1.Connect(ctx)
		if err != nil {
			// Fail closed: an inhibitor that cannot be seen may exist.
			fmt.Fprintf(out, "no reboot: cannot ask logind for inhibitors: %v\n", err)
			return errNoReboot
		}
		defer m.Close()
		inhibitors, err := m.ListInhibitors(ctx)
		if err != nil {
			fmt.Fprintf(out, "no reboot: %v\n", err)
			return errNoReboot
		}
		for _, i := range inhibitors {
			if i.Blocks("shutdown") {
				fmt.Fprintf(out, "no reboot: %s (pid %d) blocks shutdown: %s\n", i.Who, i.PID, i.Why)
				return errNoReboot
			}
		}
		fmt.Fprintf(out, "reboot allowed: %s exists, no maintenance, no block inhibitor\n", cfg.RebootSentinel)
		return nil
	}
	return cmd
}
