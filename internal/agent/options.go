package agent

import (
	"log/slog"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/clock"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/identity"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/login1"
	"github.com/kustodian/kustodian/internal/notify"
	"github.com/kustodian/kustodian/internal/systemd"
)

// Options build an Agent.
type Options struct {
	Config   config.Agent
	NodeName string
	// Owner is the Node the agent's token is bound to (nil for other
	// credentials): the locks it takes are owned by that Node.
	Owner *lock.NodeRef
	Kube  kubernetes.Interface
	// Dynamic reads the MaintenancePolicies and MaintenanceRollouts.
	Dynamic dynamic.Interface
	// Metadata watches the Nodes' labels for rollouts (rollouts.enabled).
	Metadata metadata.Interface
	Log      *slog.Logger
	Notifier systemd.Notifier
	// Login1 is logind on the system bus; nil without one (the agent then
	// holds no inhibitor locks and does not see reboots coming).
	Login1 *login1.Manager
	// Token is the token the agent's clients use (identity.UseRenewed;
	// zero: not a JWT). Its renewals come through TokenRenewed and
	// TokenRenewalFailed.
	Token identity.Token
	// HostWarning, from the doctor's checks at start, ends every STATUS.
	HostWarning string
	// Evictor, when set, lists and evicts the node's pods: a client with the
	// kubelet's identity, read from EvictorKubeconfig (drain.kubeletKubeconfig).
	// Without one, Kube does.
	Evictor           kubernetes.Interface
	EvictorKubeconfig string
	Clock             clock.WithTicker // its time and timers; nil: the real clock
	// Notifications sends the notifications of notify.urls (nil: none).
	Notifications *notify.Sender
	// ConnWatch, wrapped around Kube's and Dynamic's transports, tells of
	// requests that could not reach the API server (nil: failed watches
	// alone do).
	ConnWatch *ConnWatch
}
