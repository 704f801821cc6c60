package nodecmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/doctor"
	"github.com/kustodian/kustodian/internal/identity"
	"github.com/kustodian/kustodian/internal/login1"
	"github.com/kustodian/kustodian/internal/patch"
)

// KubeletConfigs are where kubelets keep their configuration file, tried
// in order.
var KubeletConfigs = []string{"/var/lib/kubelet/config.yaml", "/etc/kubernetes/kubelet-config.yaml", "/etc/kubernetes/kubelet/kubelet-config.json"}

func newDoctorCommand() *cobra.Command {
	var output, kubeletConfig string
	cmd := &cobra.Command{
		Use:   "doctor [-o text|json] [--kubelet-config PATH]",
		Short: "Check that this host is ready for the reboots and maintenances Kustodian makes",
		Long: `doctor checks this host before a reboot can hurt, and says how to fix each
finding:

  logind-inhibit-delay  logind's InhibitDelayMaxSec covers the kubelet's
                        shutdownGracePeriod (else pods are killed mid-shutdown;
                        Ubuntu's unattended-upgrades sets 30 s)
  kubelet-inhibitor     the kubelet holds its delay inhibitor on shutdown
  path-unit             kustodian.path is enabled and active
  kubeconfig            the node's kubeconfig reaches the API server; its
                        token's expiry
  kured-sentinel        where Kured runs, its --reboot-sentinel-command is
                        kustodian reboot-gate
  kubelet-evictions     the kubelet's kubeconfig works as this node's kubelet,
                        so that kustodian-ctl install --kubelet-evictions can
                        be turned on

Exit 0: all OK; 1: a warning, or a fact that could not be gathered; 2: a
failure. The agent runs the same checks when it starts and logs what is not OK.`,
		Example: `  kustodian doctor
  kustodian doctor -o json`,
		Args: cobra.NoArgs,
	}
	cf := addConfigFlags(cmd.Flags())
	showOnly(cmd, "kubeconfig", "node-name", "namespace", "drain-kubelet-kubeconfig", "kured-enabled", "kured-namespace", "kured-daemonset")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text, json or yaml")
	cmd.Flags().StringVar(&kubeletConfig, "kubelet-config", "auto", "the kubelet's configuration file: auto (the first of "+strings.Join(KubeletConfigs, ", ")+" that exists) or a path")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if output != "text" && output != "json" && output != "yaml" {
			return fmt.Errorf("--output %q: use text, json or yaml", output)
		}
		cfg, err := cf.Load()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), 30*time.Second)
		defer cancel()
		facts := gatherDoctorFacts(ctx, cfg, kubeletConfig)
		findings := doctor.Run(facts)
		if err := printFindings(cmd.OutOrStdout(), output, facts.Node, findings); err != nil {
			return err
		}
		if code := doctor.ExitCode(findings); code != 0 {
			return exitCode(code)
		}
		return nil
	}
	return cmd
}

// printFindings prints the findings as a table (with each fix below its
// finding), or as JSON or YAML.
func printFindings(w io.Writer, output, node string, findings []doctor.Finding) error {
	if output == "json" || output == "yaml" {
		return printAs(w, output, struct {
			Node     string           `json:"node,omitempty"`
			Status   doctor.Status    `json:"status"`
			Findings []doctor.Finding `json:"findings"`
		}{node, doctor.Worst(findings), findings})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	counts := map[doctor.Status]int{}
	for _, f := range findings {
		counts[f.Status]++
		fmt.Fprintf(tw, "%s\t%s\t%s\n", strings.ToUpper(string(f.Status)), f.Check, f.Message)
		if f.Fix != "" {
			fmt.Fprintf(tw, "\t\tfix: %s\n", f.Fix)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d ok, %d warning(s), %d failure(s), %d unknown\n", counts[doctor.OK], counts[doctor.Warn], counts[doctor.Fail], counts[doctor.Unknown])
	return nil
}

// gatherDoctorFacts reads what the checks judge: logind, the kubelet's
// configuration, systemd, the API server. A fact that cannot be read is
// recorded with its error, never guessed.
func gatherDoctorFacts(ctx context.Context, cfg config.Agent, kubeletConfig string) doctor.Facts {
	f := doctor.Facts{Now: time.Now(), Kubeconfig: cfg.Kubeconfig,
		KuredDaemonSet: cfg.Kured.Namespace + "/" + cfg.Kured.DaemonSet}
	f.KubeletConfig, f.ShutdownGracePeriod, f.ShutdownGracePeriodCriticalPods, f.KubeletConfigErr = readKubeletConfig(kubeletConfig)
	gatherLogind(ctx, &f)
	f.PathUnitFileState, f.PathUnitActiveState, f.PathUnitErr = unitState(ctx, "kustodian.path")

	f.KubeletKubeconfig, f.KubeletUser, f.KubeletErr = kubeletIdentity(ctx, cfg)
	f.RolloutsEnabled = cfg.Rollouts.Enabled
	f.SelfUpdates, f.SelfUpdatesErr = patch.SelfUpdates(ctx, "/", patch.Exec(io.Discard))
	if _, err := loadKubeconfig(cfg.Kubeconfig); err != nil {
		f.ReachErr = err
		f.KuredErr = errors.New("the node's kubeconfig cannot be used")
		return f
	}
	f.KubeconfigOK = true
	nc, err := connectWith(ctx, cfg, false, nil, nil)
	f.Node, f.TokenExpires, f.TokenLateAt = nc.node, nc.token.ExpiresAt(), nc.token.LateAt()
	if err != nil {
		f.ReachErr = err
		f.KuredErr = errors.New("the API server cannot be reached")
	} else if cfg.Kured.Enabled == "false" {
		f.KuredDisabled = true
	} else {
		ds, err := nc.kube.AppsV1().DaemonSets(cfg.Kured.Namespace).Get(ctx, cfg.Kured.DaemonSet, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			f.KuredErr = err
		default:
			f.KuredFound = true
			f.KuredArgs = kuredArgs(ds)

		}
	}
	return f
}

// readKubeletConfig reads the kubelet's graceful-shutdown settings from
// setting ("auto": the first of KubeletConfigs that exists; path "": none).
func readKubeletConfig(setting string) (path string, grace, critical time.Duration, err error) {
	path = setting
	if setting == "auto" {
		path = ""
		for _, p := range KubeletConfigs {
			if _, err := os.Stat(p); err == nil {
				path = p
				break
			}
		}
		if path == "" {
			return "", 0, 0, nil
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return path, 0, 0, err
	}
	var kc struct {
		ShutdownGracePeriod             metav1.Duration `json:"shutdownGracePeriod"`
		ShutdownGracePeriodCriticalPods metav1.Duration `json:"shutdownGracePeriodCriticalPods"`
	}
	if err := yaml.Unmarshal(b, &kc); err != nil {
		return path, 0, 0, fmt.Errorf("%s: %w", path, err)
	}
	return path, kc.ShutdownGracePeriod.Duration, kc.ShutdownGracePeriodCriticalPods.Duration, nil
}

// gatherLogind reads logind's effective delay, its inhibitors and the
// files that set the delay.
func gatherLogind(ctx context.Context, f *doctor.Facts) {
	if _, err := os.Stat(systemBusSocket); err != nil {
		f.LogindErr = fmt.Errorf("no system D-Bus (%s): is systemd running?", systemBusSocket)
		return
	}
	m, err := login1.Connect(ctx)
	if err != nil {
		f.LogindErr = err
		return
	}
	defer m.Close()
	if f.InhibitDelayMax, err = m.InhibitDelayMax(ctx); err != nil {
		f.LogindErr = err
		return
	}
	inhibitors, err := m.ListInhibitors(ctx)
	if err != nil {
		f.LogindErr = err
		return
	}
	for _, i := range inhibitors {
		f.Inhibitors = append(f.Inhibitors, doctor.Inhibitor{What: i.What, Who: i.Who, Mode: i.Mode})
	}
	// Which file set the delay only explains it: an unreadable drop-in
	// leaves the explanation out.
	f.DropIns, _ = doctor.LogindDropIns("/")
}

// unitState is a unit's UnitFileState and ActiveState, from systemd.
func unitState(ctx context.Context, unit string) (fileState, activeState string, err error) {
	if _, err := os.Stat(systemBusSocket); err != nil {
		return "", "", fmt.Errorf("no system D-Bus (%s): is systemd running?", systemBusSocket)
	}
	conn, err := sddbus.NewSystemConnectionContext(ctx)
	if err != nil {
		return "", "", err
	}
	defer conn.Close()
	props, err := conn.GetUnitPropertiesContext(ctx, unit)
	if err != nil {
		return "", "", err
	}
	fileState, _ = props["UnitFileState"].(string)
	activeState, _ = props["ActiveState"].(string)
	if props["LoadState"] == "not-found" {
		fileState = ""
	}
	return fileState, activeState, nil
}

// kubeletIdentity finds the kubelet's kubeconfig as the drain does and
// asks the API server who it is.
func kubeletIdentity(ctx context.Context, cfg config.Agent) (path, user string, err error) {
	path, err = findKubeletKubeconfig(cfg.Drain.KubeletKubeconfig, config.KubeletKubeconfigs)
	if err != nil || path == "" {
		return path, "", err
	}
	k, err := kubeletClient(path)
	if err != nil {
		return path, "", err
	}
	u, err := identity.Review(ctx, k)
	return path, u.Name, err
}

// checkHostAtStart makes the doctor's host checks as the agent starts (the
// kubelet's graceful shutdown against logind), logs what is wrong with its
// fix, and returns a line for the agent's STATUS ("" when all is well).
func checkHostAtStart(ctx context.Context, log *slog.Logger) string {
	var f doctor.Facts
	f.KubeletConfig, f.ShutdownGracePeriod, f.ShutdownGracePeriodCriticalPods, f.KubeletConfigErr = readKubeletConfig("auto")
	if f.KubeletConfig == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	gatherLogind(ctx, &f)
	findings := doctor.AtStart(f)
	for _, r := range findings {
		log.Warn("host check: "+r.Message, "check", r.Check, "fix", r.Fix)
	}
	if len(findings) == 0 {
		return ""
	}
	return fmt.Sprintf("host check: %d problem(s), see kustodian doctor", len(findings))
}

// printAs prints v as indented JSON, or as YAML (-o json, -o yaml).
func printAs(w io.Writer, format string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if format == "yaml" {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return err
		}
	} else {
		b = append(b, '\n')
	}
	_, err = w.Write(b)
	return err
}

// kuredArgs are the flags Kured's DaemonSet gives it, in the order Kured
// takes them: each container's command and args, then the flags it reads
// from KURED_* variables after the command line (a variable wins, as a
// last flag does).
func kuredArgs(ds *appsv1.DaemonSet) []string {
	var args []string
	for _, c := range ds.Spec.Template.Spec.Containers {
		args = append(append(args, c.Command...), c.Args...)
		for _, e := range c.Env {
			if e.Name == "KURED_REBOOT_SENTINEL_COMMAND" && e.ValueFrom == nil {
				args = append(args, "--reboot-sentinel-command="+e.Value)
			}
		}
	}
	return args
}
