package agent

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/identity"
	"github.com/kustodian/kustodian/internal/metrics"
)

// The Events of a node's credentials: its token expires soon, or has, and
// is not renewed; a renewal failed (recorded at the first failure for a
// token, when a third of its lifetime is left).
const (
	ReasonTokenExpiring      = "TokenExpiring"
	ReasonTokenRenewalFailed = "TokenRenewalFailed"
)

// TokenWarnBefore is how long before it expires the agent warns of a token
// that does not say when it was issued (and so when it is due).
const TokenWarnBefore = 14 * 24 * time.Hour

// tokenSide is the token the agent's clients use, as its renewer
// (identity.Renewer, a goroutine of its own) tells it.
type tokenSide struct {
	mu      sync.Mutex
	current identity.Token
	failure string        // the last renewal's error; "" after a success
	retry   time.Duration // when the renewer tries again after it
	// said is the warning last recorded as an Event (its reason and
	// token); the Run loop's alone.
	said string
}

// TokenRenewed is told of a renewed token: the agent's clients read it
// from its file within a minute.
func (a *Agent) TokenRenewed(t identity.Token) {
	a.reported.token.mu.Lock()
	a.reported.token.current, a.reported.token.failure = t, ""
	a.reported.token.mu.Unlock()
	a.log.Info("renewed the node's token", "expires", t.ExpiresAt().UTC().Format(time.RFC3339), "renewAt", t.RenewAt().UTC().Format(time.RFC3339))
	a.updateMetrics(func(d *metrics.Data) { d.TokenRenewed(metrics.ResultSucceeded, t.ExpiresAt()) })
	a.poke()
}

// TokenRenewalFailed is told of a renewal that failed, and when the
// renewer tries again.
func (a *Agent) TokenRenewalFailed(err error, current identity.Token, retry time.Duration) {
	a.reported.token.mu.Lock()
	a.reported.token.current, a.reported.token.failure, a.reported.token.retry = current, err.Error(), retry
	a.reported.token.mu.Unlock()
	a.log.Warn("cannot renew the node's token; trying again", "in", retry, "expires", current.ExpiresAt().UTC().Format(time.RFC3339), "err", err)
	a.updateMetrics(func(d *metrics.Data) { d.TokenRenewed(metrics.ResultFailed, current.ExpiresAt()) })
	a.poke()
}

// tokenWarning says what is wrong with the node's token, if anything, as
// an Event's reason and message: a renewal that failed, a token past the
// point where it should have been renewed, or expired.
func (a *Agent) tokenWarning() (reason, message string) {
	a.reported.token.mu.Lock()
	t, failure, retry := a.reported.token.current, a.reported.token.failure, a.reported.token.retry
	a.reported.token.mu.Unlock()
	if t.Expires == 0 {
		return "", ""
	}
	now, exp := a.now(), t.ExpiresAt()
	when := exp.UTC().Format(time.RFC3339)
	renew := fmt.Sprintf("renew it: kustodian-ctl kubeconfig %s --rotate", a.node)
	switch {
	case !now.Before(exp):
		return ReasonTokenExpiring, fmt.Sprintf("the token of %s expired at %s; %s", a.cfg.Kubeconfig, when, renew)
	case failure != "":
		return ReasonTokenRenewalFailed, fmt.Sprintf("the node's token expires in %s (%s) and its renewal failed, trying again every %s: %s",
			duration.HumanDuration(exp.Sub(now)), when, retry, failure)
	case t.Lifetime() > 0 && now.Before(t.LateAt()), t.Lifetime() == 0 && exp.Sub(now) > TokenWarnBefore:
		return "", ""
	}
	return ReasonTokenExpiring, fmt.Sprintf("the token of %s expires in %s (%s) and is not renewed; %s", a.cfg.Kubeconfig, duration.HumanDuration(exp.Sub(now)), when, renew)
}

// warnToken logs a warning about the node's token and records it as an
// Event on the node: once for each kind of warning and token.
func (a *Agent) warnToken(ctx context.Context, node *corev1.Node) {
	reason, w := a.tokenWarning()
	if w == "" || node == nil {
		return
	}
	a.reported.token.mu.Lock()
	key := reason + " " + strconv.FormatInt(a.reported.token.current.Expires, 10)
	a.reported.token.mu.Unlock()
	if a.reported.token.said == key {
		return
	}
	a.reported.token.said = key
	a.log.Warn(w)
	a.applyEffects(ctx, node.UID, nil, decide.Said(reason, true, w))
}
