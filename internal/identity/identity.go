// Package identity says which node a node's credentials belong to: a
// ServiceAccount token bound to a Node object (TokenRequest with a
// boundObjectRef of kind Node) makes the API server see that Node's name
// and UID in the user's extra info, which a SelfSubjectReview returns.
// The token's own claims are read only for what the API server does not
// say: when it expires.
package identity

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The extra info the API server gives a user whose token is bound to a
// Node.
const (
	ExtraNodeName = "authentication.kubernetes.io/node-name"
	ExtraNodeUID  = "authentication.kubernetes.io/node-uid"
	ExtraPodName  = "authentication.kubernetes.io/pod-name"
)

// User is who the API server takes the credentials for.
type User struct {
	Name string
	// Node and NodeUID are the Node the token is bound to ("" when it is
	// not bound to a Node, or bound to a Pod as well).
	Node, NodeUID string
}

// Review asks the API server who the client's credentials are
// (SelfSubjectReview, which every authenticated user may create).
func Review(ctx context.Context, client kubernetes.Interface) (User, error) {
	r, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return User{}, fmt.Errorf("asking the API server who these credentials are (SelfSubjectReview): %w", err)
	}
	info := r.Status.UserInfo
	u := User{Name: info.Username}
	one := func(key string) string {
		if v := info.Extra[key]; len(v) == 1 {
			return v[0]
		}
		return ""
	}
	if one(ExtraPodName) == "" {
		u.Node, u.NodeUID = one(ExtraNodeName), one(ExtraNodeUID)
	}
	return u, nil
}

// claims are the parts of a ServiceAccount token's payload that matter here.
type claims struct {
	Kubernetes struct {
		Namespace string `json:"namespace"`
		Node      *struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"node"`
		ServiceAccount struct {
			Name string `json:"name"`
			UID  string `json:"uid"`
		} `json:"serviceaccount"`
	} `json:"kubernetes.io"`
	Exp int64  `json:"exp"`
	Iat int64  `json:"iat"`
	Iss string `json:"iss"`
}

// Token is what a bound token says of itself. Its signature is not checked:
// the API server does that; this only reads which node the token is for.
type Token struct {
	Node           string
	NodeUID        string
	Namespace      string
	ServiceAccount string
	// ServiceAccountUID tells a ServiceAccount deleted and made again
	// (uninstall, install) from the one before.
	ServiceAccountUID string
	Expires           int64  // Unix seconds; 0 when absent
	Issued            int64  // Unix seconds; 0 when absent
	Issuer            string // the API server's issuer (the iss claim)
	// Raw is the token itself.
	Raw string
}

// ParseToken reads a JWT's claims. A token that is not a JWT (a static
// token, for example) gives ok=false and no error.
func ParseToken(token string) (t Token, ok bool, err error) {
	parts := strings.Split(strings.TrimSpace(token), ".")
	if len(parts) != 3 {
		return t, false, nil
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return t, false, nil
	}
	var c claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return t, false, fmt.Errorf("token claims: %w", err)
	}
	t = Token{Namespace: c.Kubernetes.Namespace, ServiceAccount: c.Kubernetes.ServiceAccount.Name, ServiceAccountUID: c.Kubernetes.ServiceAccount.UID,
		Expires: c.Exp, Issued: c.Iat, Issuer: c.Iss,
		Raw: strings.TrimSpace(token)}
	if c.Kubernetes.Node != nil {
		t.Node, t.NodeUID = c.Kubernetes.Node.Name, c.Kubernetes.Node.UID
	}
	return t, true, nil
}

// BoundNode is what a rest.Config's token says of itself; its Node is ""
// when the token is not bound to a Node (or is not a JWT at all).
func BoundNode(c *rest.Config) (Token, error) {
	token := c.BearerToken
	if token == "" && c.BearerTokenFile != "" {
		b, err := os.ReadFile(c.BearerTokenFile)
		if err != nil {
			return Token{}, fmt.Errorf("reading the token file %s: %w", c.BearerTokenFile, err)
		}
		token = string(b)
	}
	if token == "" {
		return Token{}, nil
	}
	t, ok, err := ParseToken(token)
	if err != nil || !ok {
		return Token{}, err
	}
	return t, nil
}
