package agent

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kustodian/kustodian/internal/decide"
)

// ReasonTokenExpiring is the Event of a node whose kubeconfig's token
// expires within TokenWarnBefore.
const ReasonTokenExpiring = "TokenExpiring"

// TokenWarnBefore is how long before its token expires the agent warns.
const TokenWarnBefore = 14 * 24 * time.Hour

// tokenWarning says, when the node's token expires within TokenWarnBefore,
// when and how to renew it; "" otherwise (or when its expiry is unknown).
func (a *Agent) tokenWarning() string {
	if a.reported.tokenExpires.IsZero() {
		return ""
	}
	left := a.reported.tokenExpires.Sub(a.now())
	if left > TokenWarnBefore {
		return ""
	}
	renew := fmt.Sprintf("renew it: kustodian-ctl kubeconfig %s --rotate", a.node)
	if left <= 0 {
		return fmt.Sprintf("the token of %s expired at %s; %s", a.cfg.Kubeconfig, a.reported.tokenExpires.UTC().Format(time.RFC3339), renew)
	}
	return fmt.Sprintf("the token of %s expires in %s (%s); %s", a.cfg.Kubeconfig, duration.HumanDuration(left),
		a.reported.tokenExpires.UTC().Format(time.RFC3339), renew)
}

// warnToken logs the token's coming expiry and records it as an Event on
// the node, once per run of the agent.
func (a *Agent) warnToken(ctx context.Context, node *corev1.Node) {
	w := a.tokenWarning()
	if w == "" || a.reported.tokenWarned || node == nil {
		return
	}
	a.reported.tokenWarned = true
	a.log.Warn(w)
	a.applyEffects(ctx, node.UID, nil, decide.Said(ReasonTokenExpiring, true, w))
}
