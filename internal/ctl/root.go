// Package ctl builds the command tree of `kustodian-ctl`, the admin CLI, in
// kubectl's conventions (k8s.io/cli-runtime flags, -o wide|json|yaml,
// --watch). It must never import D-Bus or systemd code: it runs on admins'
// machines (see deps_test.go).
package ctl

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/internal/status"
	"github.com/kustodian/kustodian/internal/version"
)

// DefaultNamespace is where Kustodian lives unless -n says otherwise.
const DefaultNamespace = "kustodian"

// PluginName is the name under which kubectl finds the CLI as a plugin.
const PluginName = "kubectl-kustodian"

// options are shared by every command.
type options struct {
	// kubeconfig and overrides are kubectl's connection flags
	// (--kubeconfig, --context, -n, -s, --token, ...).
	kubeconfig string
	overrides  clientcmd.ConfigOverrides
	streams    genericiooptions.IOStreams
	// Kured's DaemonSet, which carries its lock (as the agents'
	// kured.namespace and kured.daemonSet).
	kuredNamespace, kuredDaemonSet string
	kuredKeys                      []string
	// dryRun is the --dry-run of the command that runs (none when it has
	// none): with server, every write the clients send is a dry run.
	dryRun dryRun
	// clusters: --all-contexts and --fleet (clusters.go).
	clusters clusterFlags
	// timeout bounds each request (0: the kubeconfig's, or none), as when
	// one of several clusters is steered.
	timeout time.Duration
}

func (o *options) namespace() string {
	if ns := o.overrides.Context.Namespace; ns != "" {
		return ns
	}
	return DefaultNamespace
}

// restConfig is the API server connection the flags describe, as kubectl
// reads them (--kubeconfig, else $KUBECONFIG, else ~/.kube/config).
// client-go's default limiter (5 qps, burst 10) made install, a GET and an
// apply per object, take 400 ms per object after the first five.
func (o *options) restConfig() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &o.overrides).ClientConfig()
	if err != nil {
		return nil, kubeconfigError(err)
	}
	cfg.UserAgent = "kustodian-ctl/" + version.Version
	if o.timeout > 0 && cfg.Timeout == 0 {
		cfg.Timeout = o.timeout
	}
	cfg.QPS, cfg.Burst = 50, 100
	if o.dryRun == dryRunServer {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return serverDryRun{rt} })
	}
	return cfg, nil
}

func (o *options) client() (kubernetes.Interface, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(cfg)
}

// dynamicClient writes manifests of any kind (install, uninstall).
func (o *options) dynamicClient() (dynamic.Interface, error) {
	cfg, err := o.restConfig()
	if err != nil {
		return nil, err
	}
	return dynamic.NewForConfig(cfg)
}

// show prints the status once or, with watch, again at every change that
// alters rows (and with progress, the fleet's progress line after each).
func (o *options) show(ctx context.Context, r status.Reader, watch, progress bool, out *output,
	print func(io.Writer, status.MaintenanceStatus) error, rows func(status.MaintenanceStatus) []status.Node) error {
	if watch {
		return watchStatus(ctx, r, o.streams.Out, out, progress, print, rows)
	}
	s, err := r.Read(ctx)
	if err != nil {
		return err
	}
	return print(o.streams.Out, s)
}

// reader reads the status of the namespace -n names.
func (o *options) reader() (status.Reader, error) {
	client, err := o.client()
	if err != nil {
		return status.Reader{}, err
	}
	dyn, err := o.dynamicClient()
	if err != nil {
		return status.Reader{}, err
	}
	return status.Reader{Client: client, Dynamic: dyn, Namespace: o.namespace(), KuredNamespace: o.kuredNamespace,
		KuredDaemonSet: o.kuredDaemonSet, KuredKeys: o.kuredKeys}, nil
}

// NewRoot returns the `kustodian-ctl` root command. invokedAs is the
// program's name (os.Args[0]): as kubectl-kustodian, usage reads "kubectl kustodian".
func NewRoot(streams genericiooptions.IOStreams, invokedAs string) *cobra.Command {
	use, display := "kustodian-ctl", "kustodian-ctl"
	if pluginMode(invokedAs) {
		use, display = "kustodian", "kubectl kustodian"
	}
	o := &options{streams: streams}
	root := &cobra.Command{
		Use:   use,
		Short: "See and steer Kustodian node maintenance in a cluster",
		Long: `kustodian-ctl shows which node holds the maintenance lock, which nodes wait and
why, and lets an admin pause the rollout or release the lock of a failed node.
It reads and writes Kustodian's objects in its namespace (-n, default kustodian).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: display},
	}
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetFlagErrorFunc(suggestFlag)
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error { return o.checkClusters(cmd) }
	root.PersistentFlags().StringVar(&o.kubeconfig, "kubeconfig", "", "path to the kubeconfig file to use for CLI requests")
	kubeFlags := clientcmd.RecommendedConfigOverrideFlags("")
	kubeFlags.ClusterOverrideFlags.APIServer.ShortName = "s" // as kubectl's -s
	kubeFlags.ContextOverrideFlags.Namespace.Default = DefaultNamespace
	kubeFlags.ContextOverrideFlags.Namespace.Description = "the namespace of Kustodian's objects"
	kubeFlags.CurrentContext.Description = "the kubeconfig context to use; several, separated by commas, for the commands that read many clusters"
	clientcmd.BindOverrideFlags(&o.overrides, root.PersistentFlags(), kubeFlags)
	o.clusters.add(root)
	root.PersistentFlags().StringVar(&o.kuredNamespace, "kured-namespace", kured.Namespace, "namespace of Kured's DaemonSet (as the agents' kured.namespace)")
	root.PersistentFlags().StringVar(&o.kuredDaemonSet, "kured-daemonset", kured.DaemonSet, "name of Kured's DaemonSet, which carries its lock (as the agents' kured.daemonSet)")
	root.PersistentFlags().StringSliceVar(&o.kuredKeys, "kured-lock-annotations", kured.LockAnnotations, "annotation keys of Kured's DaemonSet its lock is read under, and that install lets the agents write (as the agents' kured.lockAnnotations)")
	root.AddCommand(
		newStatusCommand(o),
		newQueueCommand(o),
		newPauseCommand(o),
		newPolicyCommand(o),
		newRolloutCommand(o),
		newResumeCommand(o),
		newReleaseCommand(o),
		newHistoryCommand(o),
		newPlanCommand(o),
		newKubeconfigCommand(o),
		newInstallCommand(o),
		newVerifyCommand(o),
		newUninstallCommand(o),
		newVersionCommand(o),
		newWaitCommand(o),
		newRequestCommand(o),
		newDoneCommand(o),
		newDashboardCommand(o),
	)
	if pluginMode(invokedAs) {
		renameForPlugin(root)
	}
	return root
}
