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
	"github.com/kustodian/kustodian/internal/status"
)

// AgentServiceAccount is the ServiceAccount whose tokens the nodes get.
const AgentServiceAccount = "kustodian-agent"

func newKubeconfigCommand(o *options) *cobra.Command {
	var duration time.Duration
	var server, file string
	cmd := &cobra.Command{
		Use:   "kubeconfig NODE",
		Short: "Mint a kubeconfig for NODE's agent, with a token bound to the Node object",
		Long: `kubeconfig asks the API server for a token of the ServiceAccount kustodian-agent
bound to the Node object NODE (TokenRequest with boundObjectRef kind Node). The
token names NODE in its claims, works only while that Node exists, and expires
after --duration (the API server may shorten it). The kubeconfig goes to -f FILE
(mode 0600; default /etc/kustodian/kubeconfig on the node, stdout with -f -).`,
		Example: `  kustodian-ctl kubeconfig node-1 -f node-1.kubeconfig
  kustodian-ctl kubeconfig node-1 --server https://10.0.0.1:6443 -f - | ssh node-1 'install -m 600 /dev/stdin /etc/kustodian/kubeconfig'`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, err := o.client()
			if err != nil {
				return err
			}
			rc, err := o.config.ToRESTConfig()
			if err != nil {
				return err
			}
			cfg, expires, err := nodeKubeconfig(cmd.Context(), client, rc, o.namespace(), args[0], server, duration)
			if err != nil {
				return err
			}
			data, err := clientcmd.Write(*cfg)
			if err != nil {
				return err
			}
			if file == "-" {
				_, err = o.streams.Out.Write(data)
				return err
			}
			if err := atomicfile.Write(file, data, 0o600); err != nil {
				return err
			}
			fmt.Fprintf(o.streams.ErrOut, "wrote %s for node %s (token expires %s)\n", file, args[0], expires.Format(time.RFC3339))
			return nil
		},
	}
	cmd.Flags().DurationVar(&duration, "duration", 365*24*time.Hour, "how long the token is valid")
	cmd.Flags().StringVar(&server, "server", "", "the API server's URL as the node reaches it (default: this kubeconfig's)")
	cmd.Flags().StringVarP(&file, "file", "f", "/etc/kustodian/kubeconfig", "where to write it; - for stdout")
	return cmd
}

// nodeKubeconfig mints a token bound to node and wraps it in a kubeconfig.
func nodeKubeconfig(ctx context.Context, client kubernetes.Interface, rc *rest.Config, ns, node, server string, d time.Duration) (*clientcmdapi.Config, time.Time, error) {
	n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, time.Time{}, fmt.Errorf("node %q not found: a token can only be bound to an existing Node", node)
	}
	if err != nil {
		return nil, time.Time{}, status.Explain(err, "get", "nodes", "")
	}
	seconds := int64(d.Seconds())
	tr, err := client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, AgentServiceAccount, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{
			ExpirationSeconds: &seconds,
			BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: n.Name, UID: n.UID},
		},
	}, metav1.CreateOptions{})
	if apierrors.IsNotFound(err) {
		return nil, time.Time{}, fmt.Errorf("no ServiceAccount %s in namespace %s: Kustodian is not installed there; run kustodian-ctl install, or pass -n", AgentServiceAccount, ns)
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
	cfg.Clusters["cluster"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: ca, InsecureSkipTLSVerify: rc.Insecure}
	user := "kustodian-agent-" + node
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["kustodian"] = &clientcmdapi.Context{Cluster: "cluster", AuthInfo: user, Namespace: ns}
	cfg.CurrentContext = "kustodian"
	return cfg, tr.Status.ExpirationTimestamp.Time, nil
}
