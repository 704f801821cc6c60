package ctl

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	authv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kustodian/kustodian/internal/atomicfile"
	"github.com/kustodian/kustodian/internal/identity"
	"github.com/kustodian/kustodian/internal/manifests"
	"github.com/kustodian/kustodian/internal/status"
)

// DefaultTokenDuration is how long a node's token lasts unless told
// otherwise: long enough not to be a chore, short enough that a copied
// kubeconfig does not work for ever. Renew with --rotate.
const DefaultTokenDuration = 90 * 24 * time.Hour

func newKubeconfigCommand(o *options) *cobra.Command {
	var duration, renewBefore time.Duration
	var server, file, oldFile string
	var rotate, insecure bool
	cmd := &cobra.Command{
		Use:   "kubeconfig NODE",
		Short: "Mint a kubeconfig for NODE's agent, with a token bound to the Node object",
		Long: `kubeconfig asks the API server for a token of the ServiceAccount kustodian-agent
bound to the Node object NODE (TokenRequest with boundObjectRef kind Node). The
token names NODE in its claims, works only while that Node exists, and expires
after --duration (default 90 days; the API server may shorten it). The node
renews it itself when a third of its lifetime is left (kustodian credentials
--renew, and the agent while it runs), so a kubeconfig is minted once. The kubeconfig
goes to stdout, or to --output-file FILE (mode 0600, replaced atomically). Its
server is the API server's URL as this kubeconfig (or -s/--server) has it, or
--node-server URL when the nodes reach it at another address.

It carries the API server's CA from the admin's kubeconfig (or
--certificate-authority). When the admin's kubeconfig skips TLS verification, so
would the node's: that is refused unless --insecure-node-kubeconfig says so.

--dry-run=client mints nothing and prints the kubeconfig with a placeholder
token; --dry-run=server also sends the TokenRequest as a dry run. Neither writes
a file.

--rotate renews the token of an existing FILE in place: the token must be NODE's,
the server and CA stay as they are, and the file is replaced atomically. With
--renew-before D it does so only when the token expires within D, so that it can
run on a schedule. A renewed token does not revoke the old one: that stays valid
until it expires, or until the Node object is deleted.`,
		Example: `  kustodian-ctl kubeconfig node-1 --output-file node-1.kubeconfig
  kustodian-ctl kubeconfig node-1 --node-server https://10.0.0.1:6443 | ssh node-1 'install -m 600 /dev/stdin /etc/kustodian/kubeconfig'
  kustodian-ctl kubeconfig node-1 --output-file node-1.kubeconfig --rotate --renew-before 720h`,
		Args: oneArg("NODE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if oldFile != "" {
				return fmt.Errorf("-f is kubectl's input file, not an output: write the kubeconfig with --output-file %s (without it: stdout)", oldFile)
			}
			node := args[0]
			client, err := o.client()
			if err != nil {
				return err
			}
			rc, err := o.restConfig()
			if err != nil {
				return err
			}
			var existing *clientcmdapi.Config
			if rotate {
				if file == "-" {
					return fmt.Errorf("--rotate renews a kubeconfig file in place; name it with --output-file FILE")
				}
				var valid time.Time
				existing, valid, err = rotatable(file, node)
				if err != nil {
					return err
				}
				if renewBefore > 0 && time.Until(valid) > renewBefore {
					fmt.Fprintf(o.streams.ErrOut, "%s: the token of node %s is valid until %s, more than %s from now; not renewed\n",
						file, node, valid.Format(time.RFC3339), renewBefore)
					return nil
				}
			}
			cfg, expires, err := nodeKubeconfig(cmd.Context(), client, rc, o.namespace(), node, server, duration, o.dryRun)
			if err != nil {
				return err
			}
			if existing != nil {
				cfg = renewed(existing, cfg, server)
			}
			if c := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]; c.InsecureSkipTLSVerify && !insecure {
				return fmt.Errorf("the kubeconfig for node %s would skip TLS verification (as the admin's does): give the API server's CA with --certificate-authority FILE, or pass --insecure-node-kubeconfig to write it anyway", node)
			}
			data, err := clientcmd.Write(*cfg)
			if err != nil {
				return err
			}
			if file == "-" || o.dryRun != dryRunNone {
				_, err = o.streams.Out.Write(data)
				if err == nil && o.dryRun != dryRunNone {
					fmt.Fprintf(o.streams.ErrOut, "kubeconfig for node %s not written%s\n", node, o.dryRun.suffix())
				}
				return err
			}
			if err := atomicfile.Write(file, data, 0o600); err != nil {
				return err
			}
			verb := "wrote"
			if existing != nil {
				verb = "renewed"
			}
			fmt.Fprintf(o.streams.ErrOut, "%s %s for node %s (token expires %s)\n", verb, file, node, expires.Format(time.RFC3339))
			return nil
		},
	}
	cmd.Flags().DurationVar(&duration, "duration", DefaultTokenDuration, "how long the token is valid")
	cmd.Flags().StringVar(&server, "node-server", "", "the API server's URL as the node reaches it (default: the one this command talks to; with --rotate, the file's)")
	cmd.Flags().StringVar(&file, "output-file", "-", "write it to this file (mode 0600) instead of stdout")
	cmd.Flags().StringVarP(&oldFile, "filename", "f", "", "")
	_ = cmd.Flags().MarkHidden("filename")
	addDryRun(cmd, o, "mint nothing, print the kubeconfig with a placeholder token")
	cmd.ValidArgsFunction = func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return o.completeNodes(c, args, toComplete)
	}
	cmd.Flags().BoolVar(&rotate, "rotate", false, "renew the token of the existing FILE in place, keeping its server and CA")
	cmd.Flags().DurationVar(&renewBefore, "renew-before", 0, "with --rotate: renew only when the token expires within this long (0: always)")
	cmd.Flags().BoolVar(&insecure, "insecure-node-kubeconfig", false, "write a node kubeconfig that skips TLS verification (when the admin's does)")
	return cmd
}

// rotatable reads a node kubeconfig to renew: it must hold a token bound to
// node. valid is when that token expires.
func rotatable(file, node string) (*clientcmdapi.Config, time.Time, error) {
	cfg, err := clientcmd.LoadFromFile(file)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("--rotate: %w", err)
	}
	ctx := cfg.Contexts[cfg.CurrentContext]
	if ctx == nil || cfg.AuthInfos[ctx.AuthInfo] == nil || cfg.Clusters[ctx.Cluster] == nil {
		return nil, time.Time{}, fmt.Errorf("--rotate: %s has no current context with a user and a cluster; mint a new one without --rotate", file)
	}
	tok, ok, err := identity.ParseToken(cfg.AuthInfos[ctx.AuthInfo].Token)
	if err != nil || !ok || tok.Node == "" {
		return nil, time.Time{}, fmt.Errorf("--rotate: %s holds no token bound to a Node; mint a new one without --rotate", file)
	}
	if tok.Node != node {
		return nil, time.Time{}, fmt.Errorf("--rotate: %s is the kubeconfig of node %s, not %s", file, tok.Node, node)
	}
	return cfg, time.Unix(tok.Expires, 0), nil
}

// renewed is the existing kubeconfig with the fresh one's token; the server
// changes only when --node-server says so.
func renewed(existing, fresh *clientcmdapi.Config, server string) *clientcmdapi.Config {
	out := existing.DeepCopy()
	ctx := out.Contexts[out.CurrentContext]
	out.AuthInfos[ctx.AuthInfo].Token = fresh.AuthInfos[fresh.Contexts[fresh.CurrentContext].AuthInfo].Token
	if server != "" {
		out.Clusters[ctx.Cluster].Server = server
	}
	return out
}

// nodeKubeconfig mints a token bound to node and wraps it in a kubeconfig.
// A dry run puts a placeholder in place of the token: a client one asks
// for none, and a server one may get a real token back (the API server
// issues tokens without storing them, dry run or not), which is dropped.
func nodeKubeconfig(ctx context.Context, client kubernetes.Interface, rc *rest.Config, ns, node, server string, d time.Duration, dry dryRun) (*clientcmdapi.Config, time.Time, error) {
	n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, time.Time{}, fmt.Errorf("node %q not found: a token can only be bound to an existing Node", node)
	}
	if err != nil {
		return nil, time.Time{}, status.Explain(err, "get", "nodes", "")
	}
	seconds := int64(d.Seconds())
	tr := &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{
			ExpirationSeconds: &seconds,
			BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: n.Name, UID: n.UID},
		},
	}
	if dry == dryRunClient {
		_, err = client.CoreV1().ServiceAccounts(ns).Get(ctx, manifests.AgentServiceAccount, metav1.GetOptions{})
		tr.Status.ExpirationTimestamp = metav1.NewTime(time.Now().Add(d))
	} else {
		tr, err = client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, manifests.AgentServiceAccount, tr, metav1.CreateOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil, time.Time{}, fmt.Errorf("no ServiceAccount %s in namespace %s: Kustodian is not installed there; run kustodian-ctl install, or pass -n", manifests.AgentServiceAccount, ns)
	}
	if err != nil {
		return nil, time.Time{}, status.Explain(err, "create", "serviceaccounts/token", ns)
	}
	if server == "" {
		server = rc.Host
	}
	ca := rc.CAData
	if len(ca) == 0 && rc.CAFile != "" {
		if ca, err = os.ReadFile(rc.CAFile); err != nil {
			return nil, time.Time{}, fmt.Errorf("reading the CA %s: %w", rc.CAFile, err)
		}
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca, InsecureSkipTLSVerify: rc.Insecure && len(ca) == 0}
	user := "kustodian-agent-" + node
	token := tr.Status.Token
	if dry != dryRunNone {
		token = "<dry run: no token>"
	}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["kustodian"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: user, Namespace: ns}
	cfg.CurrentContext = "kustodian"
	return cfg, tr.Status.ExpirationTimestamp.Time, nil
}
