package identity

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"github.com/kustodian/kustodian/internal/atomicfile"
)

// A node renews its own token: a TokenRequest for its own ServiceAccount,
// bound to its own Node, when a third of the token's lifetime is left. The
// new token goes to a file of its own in the agent's state directory, so
// that the kubeconfig stays byte for byte what the admin (or their
// configuration management) put there, and the hardened service, which may
// not write /etc, may write it.

// TokenFileName is the renewed token's file in the agent's state directory.
const TokenFileName = "token"

// TokenFile is the renewed token's path in stateDir.
func TokenFile(stateDir string) string { return filepath.Join(stateDir, TokenFileName) }

// The lifetimes a node may renew its token for: the API server issues none
// shorter than 10 minutes, and the admission policy
// (kustodian-agent-<namespace>-tokens) refuses any longer than 90 days.
const (
	MinLifetime = 10 * time.Minute
	MaxLifetime = 90 * 24 * time.Hour
)

// Lifetime is how long the token was issued for; 0 when it does not say.
func (t Token) Lifetime() time.Duration {
	if t.Expires == 0 || t.Issued == 0 || t.Expires <= t.Issued {
		return 0
	}
	return time.Duration(t.Expires-t.Issued) * time.Second
}

// ExpiresAt is when the token expires; zero when it does not say.
func (t Token) ExpiresAt() time.Time {
	if t.Expires == 0 {
		return time.Time{}
	}
	return time.Unix(t.Expires, 0)
}

// RenewAt is when the token is due for renewal: a third of its lifetime
// before it expires. Zero when it does not say how long it lasts.
func (t Token) RenewAt() time.Time {
	if t.Lifetime() == 0 {
		return time.Time{}
	}
	return t.ExpiresAt().Add(-t.Lifetime() / 3)
}

// LateAt is when a renewal that has not happened is worth a warning: a
// quarter of the token's lifetime before it expires (for a 90-day token,
// 7.5 days of failed renewals and 22.5 days before it expires).
func (t Token) LateAt() time.Time {
	if t.Lifetime() == 0 {
		return time.Time{}
	}
	return t.ExpiresAt().Add(-t.Lifetime() / 4)
}

// sameIdentity: both tokens are the same issuer's, of the same
// ServiceAccount object, bound to the same Node object (names and UIDs: a
// Node or ServiceAccount deleted and made again is another one, and the
// old one's tokens are dead).
func sameIdentity(a, b Token) bool {
	return a.Node != "" && a.Issuer == b.Issuer && a.Namespace == b.Namespace && a.ServiceAccount == b.ServiceAccount &&
		a.ServiceAccountUID == b.ServiceAccountUID && a.Node == b.Node && a.NodeUID == b.NodeUID
}

// Effective is the token a node's clients use: the kubeconfig's (kube), or
// the renewed one in file when it is the same identity's and was issued
// later (a kubeconfig minted since, of any lifetime, wins). A file that is
// missing, cannot be read or holds no token is passed over: the agent
// writes it again (UseRenewed's adopt).
func Effective(kube Token, file string) (tok Token, renewed bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return kube, false
	}
	r, ok, err := ParseToken(string(b))
	if err != nil || !ok || !sameIdentity(r, kube) || r.Issued <= kube.Issued {
		return kube, false
	}
	return r, true
}

// UseRenewed makes c use the renewed token in file when Effective picks it,
// and says which token c uses. With adopt, a kubeconfig's token that could
// be renewed and is newer than the file's is written to the file first, so
// that c always reads the file: client-go reads it again every minute (and
// after a 401), and clients made before a renewal use the new token too.
func UseRenewed(c *rest.Config, file string, adopt bool) (Token, error) {
	kube, err := BoundNode(c)
	if err != nil {
		return Token{}, err
	}
	tok, renewed := Effective(kube, file)
	if !renewed {
		if !adopt || tok.Node == "" || tok.RenewAt().IsZero() {
			return tok, nil
		}
		if err := atomicfile.Write(file, []byte(tok.Raw+"\n"), 0o600); err != nil {
			return tok, fmt.Errorf("keeping the token where its renewals go: %w", err)
		}
	}
	c.BearerToken, c.BearerTokenFile = "", file
	return tok, nil
}

// Renew mints a token like t: for the same ServiceAccount, bound to the same
// Node, for the same lifetime (within MinLifetime and MaxLifetime), and
// writes it to file (mode 0600, replaced atomically). The API server may
// issue a shorter one (its --service-account-max-token-expiration). The
// old token stays valid until it expires.
func Renew(ctx context.Context, client kubernetes.Interface, t Token, file string) (Token, error) {
	if t.Node == "" || t.ServiceAccount == "" || t.Namespace == "" {
		return Token{}, fmt.Errorf("the token is not a ServiceAccount's bound to a Node; give the node a kubeconfig from kustodian-ctl kubeconfig NODE")
	}
	seconds := int64(min(max(t.Lifetime(), MinLifetime), MaxLifetime) / time.Second)
	tr, err := client.CoreV1().ServiceAccounts(t.Namespace).CreateToken(ctx, t.ServiceAccount, &authv1.TokenRequest{
		Spec: authv1.TokenRequestSpec{
			ExpirationSeconds: &seconds,
			BoundObjectRef:    &authv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: t.Node, UID: types.UID(t.NodeUID)},
		},
	}, metav1.CreateOptions{})
	if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "cannot create resource") { // RBAC's word
		return Token{}, fmt.Errorf("%w: this installation does not let nodes renew their own tokens; upgrade it with kustodian-ctl install, or renew the kubeconfig with kustodian-ctl kubeconfig %s --rotate", err, t.Node)
	}
	if err != nil {
		return Token{}, fmt.Errorf("renewing the token of node %s (TokenRequest for %s/%s): %w", t.Node, t.Namespace, t.ServiceAccount, err)
	}
	n, ok, err := ParseToken(tr.Status.Token)
	if err != nil || !ok || !sameIdentity(n, t) {
		return Token{}, fmt.Errorf("the API server's new token for node %s is not bound to it as the old one is (%+v); not used", t.Node, n)
	}
	if err := atomicfile.Write(file, []byte(n.Raw+"\n"), 0o600); err != nil {
		return Token{}, fmt.Errorf("keeping the renewed token: %w", err)
	}
	return n, nil
}

// Renewer renews a node's token whenever it is due, for as long as its
// context lasts.
type Renewer struct {
	Client kubernetes.Interface
	File   string
	Clock  clock.Clock
	// Renewed is told of each new token; Failed of each failed attempt,
	// with when the next one is.
	Renewed func(Token)
	Failed  func(err error, current Token, retry time.Duration)
}

// Run renews tok when due, and its successors after it, until ctx ends. A
// token that does not say how long it lasts is never renewed.
func (r *Renewer) Run(ctx context.Context, tok Token) {
	failures := 0
	for {
		if tok.RenewAt().IsZero() {
			return
		}
		wait := tok.RenewAt().Sub(r.Clock.Now())
		if failures > 0 {
			wait = RetryAfter(tok)
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-r.Clock.After(wait):
			}
		}
		n, err := Renew(ctx, r.Client, tok, r.File)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			failures++
			if r.Failed != nil {
				r.Failed(err, tok, RetryAfter(tok))
			}
			continue
		}
		failures, tok = 0, n
		if r.Renewed != nil {
			r.Renewed(n)
		}
	}
}

// RetryAfter is how long after a failed renewal a node tries again: a
// sixtieth of the token's lifetime (10 s for a 10-minute token, 10 minutes
// for a 90-day one), within 5 s and 10 minutes: hundreds of tries before a
// token it could not renew expires.
func RetryAfter(tok Token) time.Duration {
	return min(max(tok.Lifetime()/60, 5*time.Second), 10*time.Minute)
}
