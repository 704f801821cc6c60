package nodecmd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"github.com/kustodian/kustodian/internal/agent"
	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/identity"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/logging"
	"github.com/kustodian/kustodian/internal/login1"
	"github.com/kustodian/kustodian/internal/notify"
	"github.com/kustodian/kustodian/internal/systemd"
	"github.com/kustodian/kustodian/internal/version"
)

func newAgentCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Run the maintenance protocol for this node (started by kustodian.service)",
		Long: `The agent waits for a maintenance request (the request file), takes the
cluster-wide lock when this node's turn comes, cordons and drains the node,
creates the in-progress file, and once the request file is removed, uncordons
the node and releases the lock. Without --stay it exits 0 when the node is back
to Idle, as the systemd path unit expects.

Every option is also a key of the configuration file and an environment
variable; a flag beats the environment, which beats the file.`,
		Args: cobra.NoArgs,
	}
	cf := addConfigFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg0, err := cf.Load()
		if err != nil {
			return err
		}
		log := logging.New(os.Stderr, cfg0.LogFormat)
		notifier := systemd.SdNotifier{Log: log}
		nc, err := connectWith(cmd.Context(), cfg0, true, log, notifier.Status)
		if cmd.Context().Err() != nil {
			return nil // stopped while it waited for the API server
		}
		if err != nil {
			return err
		}
		cfg, node := nc.cfg, nc.node
		log.Info("starting", "version", version.String("kustodian"), "node", node, "server", nc.rest.Host)
		logind := connectLogind(cmd.Context(), log)
		if logind != nil {
			defer logind.Close()
		}
		hostWarning := checkHostAtStart(cmd.Context(), log)
		// The agent's clients tell it of requests that cannot reach the
		// API server.
		conns := agent.NewConnWatch()
		watched := rest.CopyConfig(nc.rest)
		watched.Wrap(conns.Wrap)
		kube, err := kubernetes.NewForConfig(watched)
		if err != nil {
			return fmt.Errorf("kubeconfig %s: %w", cfg.Kubeconfig, err)
		}
		dyn, err := dynamic.NewForConfig(watched)
		if err != nil {
			return fmt.Errorf("kubeconfig %s: %w", cfg.Kubeconfig, err)
		}
		meta, err := metadata.NewForConfig(watched)
		if err != nil {
			return fmt.Errorf("kubeconfig %s: %w", cfg.Kubeconfig, err)
		}
		var evictor kubernetes.Interface
		kubeletConfig, err := findKubeletKubeconfig(cfg.Drain.KubeletKubeconfig, config.KubeletKubeconfigs)
		if err != nil {
			return err
		}
		if kubeletConfig != "" {
			if evictor, err = kubeletClient(kubeletConfig); err != nil {
				return err
			}
		}
		notifications, err := notify.New(notify.Settings{URLs: cfg.Notify.URLs, Templates: cfg.Notify.Templates()}, log.With("node", node))
		if err != nil {
			return fmt.Errorf("notify: %w", err) // checked with the configuration; not expected
		}
		if len(cfg.Notify.URLs) > 0 {
			var names []string
			for i, u := range cfg.Notify.URLs {
				names = append(names, fmt.Sprintf("URL %d (%s)", i+1, notify.Redacted(u)))
			}
			log.Info("notifications go to", "urls", names)
		}
		a := agent.New(agent.Options{
			Config:   cfg,
			NodeName: node,
			Owner:    nc.bound,
			Kube:     kube,
			Dynamic:  dyn,
			Metadata: meta,
			Log:      log,
			Notifier: notifier,
			Login1:   logind,

			Token:       nc.token,
			HostWarning: hostWarning,

			Evictor:           evictor,
			EvictorKubeconfig: kubeletConfig,
			Notifications:     notifications,
			ConnWatch:         conns,
		})
		// The token is renewed while the agent runs (and, between runs, by
		// kustodian-renew.timer: kustodian credentials --renew).
		renewer := &identity.Renewer{Client: kube, File: identity.TokenFile(cfg.StateDir), Clock: clock.RealClock{},
			Renewed: a.TokenRenewed, Failed: a.TokenRenewalFailed}
		go renewer.Run(cmd.Context(), nc.token)
		return a.Run(cmd.Context())
	}
	return cmd
}

// nodeContext is what the host-side commands work with.
type nodeContext struct {
	cfg  config.Agent
	node string
	// bound is the Node the kubeconfig's token is bound to; nil for other
	// credentials.
	bound *lock.NodeRef
	rest  *rest.Config
	kube  kubernetes.Interface
	// token is the token the clients use: the kubeconfig's, or its
	// renewal (zero when it is not a JWT).
	token identity.Token
}

// connect loads the configuration, the node's name and a client of the
// API server for it, for a command a script runs: an API server that does
// not answer is an error. (The agent keeps asking: connectWith.)
func (cf *configFlags) connect(ctx context.Context) (nodeContext, error) {
	cfg, err := cf.Load()
	if err != nil {
		return nodeContext{}, err
	}
	return connectWith(ctx, cfg, false, nil, nil)
}

// connectWith is connect for a configuration loaded already. With wait, an
// API server that does not answer is asked again until it does, saying so
// in the log and through status (systemd's STATUS).
func connectWith(ctx context.Context, cfg config.Agent, wait bool, log *slog.Logger, status func(string)) (nodeContext, error) {
	// The agent (which waits) renews the token: its clients read it from
	// the renewals' file.
	adopt := wait
	nc := nodeContext{cfg: cfg}
	var err error
	if nc.rest, err = loadKubeconfig(nc.cfg.Kubeconfig); err != nil {
		return nc, err
	}
	// The token renewed last, when it is the kubeconfig's successor. Only
	// its expiry is read from the token itself: the API server does not
	// say it.
	if nc.token, err = identity.UseRenewed(nc.rest, identity.TokenFile(cfg.StateDir), adopt); err != nil {
		return nc, fmt.Errorf("kubeconfig %s: %w", nc.cfg.Kubeconfig, err)
	}
	if nc.kube, err = kubernetes.NewForConfig(nc.rest); err != nil {
		return nc, fmt.Errorf("kubeconfig %s: %w", nc.cfg.Kubeconfig, err)
	}
	user, err := review(ctx, nc.kube, wait, log, status)
	if err != nil {
		return nc, fmt.Errorf("kubeconfig %s: %w", nc.cfg.Kubeconfig, err)
	}
	if nc.node, nc.bound, err = nodeName(nc.cfg, user); err != nil {
		return nc, err
	}
	return nc, nil
}

// attemptTimeout bounds one try to reach the API server while the agent
// waits for it: an address that drops packets must not hold a try for the
// 30 s of a TCP dial, or the agent would go on long after the API server
// is back.
const attemptTimeout = 3 * time.Second

// review asks the API server whose credentials these are; with wait, until
// it answers (or ctx ends), as a starting agent waits (agent.StartBackoff).
func review(ctx context.Context, kube kubernetes.Interface, wait bool, log *slog.Logger, status func(string)) (identity.User, error) {
	b := agent.StartBackoff()
	var said agent.RepeatLog
	for {
		attempt, cancel := context.WithTimeout(ctx, attemptTimeout)
		u, err := identity.Review(attempt, kube)
		cancel()
		// While it waits, every error is asked again: right after an API
		// server starts it refuses what its authorizer has not yet read
		// (403), and an agent must not exit on that.
		if err == nil || !wait {
			return u, err
		}
		delay := b.Step()
		status(fmt.Sprintf("waiting for the API server, retrying in %s: %v", delay.Round(100*time.Millisecond), err))
		if said.Due(err, time.Now()) {
			log.Warn("the API server does not say who this node is yet; asking again every 2 s or so, this said again every 30 s", "err", err)
		}
		select {
		case <-ctx.Done():
			return u, err
		case <-time.After(delay):
		}
	}
}

// systemBusSocket is the system D-Bus; where it does not exist (a
// container without systemd, a test) the agent runs without logind.
const systemBusSocket = "/run/dbus/system_bus_socket"

func connectLogind(ctx context.Context, log *slog.Logger) *login1.Manager {
	if _, err := os.Stat(systemBusSocket); err != nil {
		log.Info("no system D-Bus; running without logind inhibitor locks")
		return nil
	}
	// The connection lives as long as ctx: the agent's, not a timeout's.
	m, err := login1.Connect(ctx)
	if err != nil {
		log.Warn("cannot reach logind; running without inhibitor locks", "err", err)
		return nil
	}
	return m
}

// loadKubeconfig reads the node's kubeconfig, with errors that say what to do.
func loadKubeconfig(path string) (*rest.Config, error) {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("kubeconfig %s does not exist; create it with kustodian-ctl kubeconfig NODE, or set --kubeconfig", path)
		}
		return nil, fmt.Errorf("kubeconfig %s cannot be read: %w", path, err)
	}
	c, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	c.UserAgent = "kustodian-agent/" + version.Version
	// A cycle makes a few dozen requests in a burst and then only
	// heartbeats; client-go's default (5 qps) would add tens of ms to each
	// step of the handoff.
	c.QPS, c.Burst = 50, 100
	// Protobuf, not JSON: every waiting agent decodes every change of the
	// lock and queue Leases, and a handoff waits for the next node's share
	// of the CPU. (The dynamic client of the MaintenancePolicies sets JSON
	// for itself: custom resources have no protobuf.)
	c.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	c.ContentType = "application/vnd.kubernetes.protobuf"
	return c, nil
}

// nodeName is the Node the kubeconfig's token is bound to, as the API
// server says (a node-scoped kubeconfig from kustodian-ctl kubeconfig),
// else --node-name, else the hostname; bound is that Node when there is
// one. A --node-name that disagrees with the token is refused: the token
// works only for its own node. So is lock.ttl: expiry means other nodes
// take the lock over, which the admission policy forbids node-bound
// tokens.
func nodeName(cfg config.Agent, user identity.User) (name string, bound *lock.NodeRef, err error) {
	if user.Node != "" {
		if cfg.NodeName != "" && cfg.NodeName != user.Node {
			return "", nil, fmt.Errorf("node name %q disagrees with kubeconfig %s, whose token is bound to node %q; use that node's kubeconfig (kustodian-ctl kubeconfig %s) or drop --node-name",
				cfg.NodeName, cfg.Kubeconfig, user.Node, cfg.NodeName)
		}
		if cfg.Lock.TTL > 0 {
			return "", nil, fmt.Errorf("lock.ttl is set, but kubeconfig %s has a node-bound token, and no node-bound agent may take over another's lock; unset lock.ttl (a lock goes with its holder's Node)", cfg.Kubeconfig)
		}
		return user.Node, &lock.NodeRef{Name: user.Node, UID: user.NodeUID}, nil
	}
	if cfg.NodeName != "" {
		return cfg.NodeName, nil, nil
	}
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "", nil, fmt.Errorf("no node name: the hostname is unknown (%v); set --node-name", err)
	}
	return strings.ToLower(h), nil, nil
}
