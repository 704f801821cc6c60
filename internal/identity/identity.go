// Package identity reads what a node's credentials say about the node: a
// ServiceAccount token bound to a Node object (TokenRequest with a
// boundObjectRef of kind Node) names that Node in its claims.
package identity

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"k8s.io/client-go/rest"
)

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
		} `json:"serviceaccount"`
	} `json:"kubernetes.io"`
	Exp int64 `json:"exp"`
}

// Token is what a bound token says of itself. Its signature is not checked:
// the API server does that; this only reads which node the token is for.
type Token struct {
	Node           string
	NodeUID        string
	Namespace      string
	ServiceAccount string
	Expires        int64 // Unix seconds; 0 when absent
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
	t = Token{Namespace: c.Kubernetes.Namespace, ServiceAccount: c.Kubernetes.ServiceAccount.Name, Expires: c.Exp}
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
