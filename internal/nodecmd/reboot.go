package nodecmd

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/lock/lockapi"
	"github.com/kustodian/kustodian/internal/login1"
)

func newRebootCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "reboot",
		Short: "Reboot this node in the middle of its maintenance, keeping the lock (for raw-protocol scripts)",
		Long: `reboot lets a maintenance script that follows the file protocol reboot the host
while it holds the maintenance lock: it asks logind to reboot and returns. It
refuses unless this node is in maintenance (the in-progress file exists) and holds
the lock. After the boot the agent resumes the maintenance; the script, which must
be idempotent, runs again and removes the request when it is done.`,
		Args: cobra.NoArgs,
	}
	cf := addConfigFlags(cmd.Flags())
	showOnly(cmd, "kubeconfig", "node-name", "namespace", "request-file", "in-progress-file", "reboot-sentinel")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		nc, err := cf.connect(cmd.Context())
		if err != nil {
			return err
		}
		cfg, node, kube := nc.cfg, nc.node, nc.kube
		obs, err := cfg.Files().Observe()
		if err != nil {
			return err
		}
		if !obs.InProgress {
			return fmt.Errorf("refusing to reboot: %s is not in maintenance (%s does not exist)", node, cfg.InProgressFile)
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
		defer cancel()
		held, err := holdsLock(ctx, kube, cfg, node)
		if err != nil {
			return err
		}
		if held == "" {
			return fmt.Errorf("refusing to reboot: %s does not hold a maintenance lock in namespace %s", node, cfg.Namespace)
		}
		m, err := login1.Connect(ctx)
		if err != nil {
			return err
		}
		defer m.Close()
		if err := m.Reboot(ctx); err != nil {
			return err
		}
		fmt.Fprintf(cmd.OutOrStdout(), "rebooting %s through logind; it keeps %s\n", node, held)
		return nil
	}
	return cmd
}

// holdsLock returns the name of a lock that node holds.
func holdsLock(ctx context.Context, kube kubernetes.Interface, cfg config.Agent, node string) (string, error) {
	return (&lockapi.Client{Kube: kube, Namespace: cfg.Namespace}).HeldBy(ctx, node)
}
