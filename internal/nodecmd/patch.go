package nodecmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kustodian/kustodian/internal/patch"
	"github.com/kustodian/kustodian/internal/rollout"
)

// newPatchCommand runs a patch campaign's job on this host, and shows
// what a campaign would install here.
func newPatchCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "patch",
		Short: "Install package updates with this host's own package manager (what a patch campaign runs)",
		Long: `patch runs the host's own package manager (apt, or dnf 4) against the host's own
configured repositories. A MaintenanceRollout with spec.patch runs "kustodian patch apply" on each
node, drained, under its lock: the first node resolves the set of versions to install,
and every later node installs exactly that set. "kustodian patch plan" shows what a
campaign would install on this host now, without installing anything.`,
	}
	cmd.AddCommand(newPatchPlanCommand(), newPatchApplyCommand(), newPatchRollbackCommand(), newPatchTakeoverCommand())
	return cmd
}

func newPatchPlanCommand() *cobra.Command {
	var s patch.Spec
	var refresh bool
	cmd := &cobra.Command{
		Use:   "plan [--updates all|security] [--include PATTERN]... [--exclude PATTERN]...",
		Short: "Show the package versions a patch campaign would install on this host now",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if errs := rollout.ValidatePatch("-", s); len(errs) > 0 {
				return errors.Join(errs...)
			}
			m, err := hostManager(io.Discard)
			if err != nil {
				return err
			}
			if refresh {
				if err := m.Refresh(cmd.Context()); err != nil {
					return err
				}
			}
			set, err := patch.Resolve(cmd.Context(), m, s)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if len(set) == 0 {
				fmt.Fprintln(out, "nothing to install")
				return nil
			}
			fmt.Fprintf(out, "%-40s %-30s %s\n", "PACKAGE", "FROM", "TO")
			for _, p := range set {
				from := p.From
				if from == "" {
					from = "(new)"
				}
				fmt.Fprintf(out, "%-40s %-30s %s\n", p.Name, from, p.To)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&s.Updates, "updates", rollout.UpdatesAll, "all, or security: the security updates only (apt: of the security releases; dnf: those a security advisory names)")
	f.StringSliceVar(&s.Include, "include", nil, "only the packages whose names match one of these patterns (shell wildcards)")
	f.StringSliceVar(&s.Exclude, "exclude", nil, "none of the packages whose names match one of these patterns")
	f.BoolVar(&refresh, "refresh", false, "read the repositories' indexes again first (apt-get update, dnf makecache --refresh)")
	return cmd
}

func newPatchApplyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "apply [DIR]",
		Short: "Run a patch campaign's job (started by the agent, in the job's directory)",
		Long: `apply reads the order the agent wrote in DIR (default: the current directory,
the job's own), installs its set (resolving it first on a campaign's first node),
keeps the old versions for a rollback, and writes what it changed to DIR/result.json.
When the campaign allows a reboot and the host needs one, it leaves the reboot
sentinel for the agent.`,
		Args: cobra.MaximumNArgs(1),
	}
	cf := addConfigFlags(cmd.Flags())
	showOnly(cmd, "reboot-sentinel")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		cfg, err := cf.Load()
		if err != nil {
			return err
		}
		m, err := hostManager(cmd.ErrOrStderr())
		if err != nil {
			return err
		}
		_, err = patch.Apply(cmd.Context(), m, jobDir(args), cfg.RebootSentinel, sayTo(cmd.OutOrStdout()))
		return err
	}
	return cmd
}

func newPatchRollbackCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "rollback [DIR]",
		Short: "Restore the packages a patch campaign's job changed (its rollback, started by the agent)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := hostManager(cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			return patch.Rollback(cmd.Context(), m, jobDir(args), sayTo(cmd.OutOrStdout()))
		},
	}
}

// hostManager is this host's package manager; its commands' output goes
// to log.
func hostManager(log io.Writer) (patch.Manager, error) { return patch.ForHost(log) }

func jobDir(args []string) string {
	if len(args) == 1 {
		return args[0]
	}
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	return dir
}

func sayTo(w io.Writer) func(string, ...any) {
	return func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
}

func newPatchTakeoverCommand() *cobra.Command {
	var undo bool
	cmd := &cobra.Command{
		Use:   "takeover [--undo]",
		Short: "Let only patch campaigns install updates: unattended-upgrades and dnf-automatic download only",
		Long: `takeover stops the host's own updaters from installing package updates by
themselves (on every node within the same hour), so that installs happen only
through patch campaigns, under the queue's lock, canaried. Their downloads go on.
It writes /` + patch.AptTakeover + ` (APT::Periodic::Unattended-Upgrade "0"),
/` + patch.DnfTakeover + ` (dnf-automatic downloads only) and masks
/` + patch.DnfInstallTimer + `. --undo removes what it wrote. kustodian doctor
warns of a host that runs rollouts and still installs by itself.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			did, err := patch.Takeover("/", undo)
			for _, d := range did {
				fmt.Fprintln(cmd.OutOrStdout(), d)
			}
			if err != nil {
				return err
			}
			if len(did) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "nothing to change")
				return nil
			}
			if _, err := os.Stat("/run/systemd/system"); err == nil {
				if out, err := exec.CommandContext(cmd.Context(), "systemctl", "daemon-reload").CombinedOutput(); err != nil {
					return fmt.Errorf("systemctl daemon-reload: %v: %s", err, strings.TrimSpace(string(out)))
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&undo, "undo", false, "remove what takeover wrote: the updaters install by themselves again")
	return cmd
}
