package identity

import (
	"encoding/base64"
	"testing"

	"k8s.io/client-go/rest"
)

func jwt(payload string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(payload)) + ".c2ln"
}

func TestParseToken(t *testing.T) {
	bound := jwt(`{"exp":1790000000,"kubernetes.io":{"namespace":"kustodian","node":{"name":"node-a","uid":"u1"},"serviceaccount":{"name":"kustodian-agent","uid":"s1"}}}`)
	tok, ok, err := ParseToken(bound)
	if err != nil || !ok || tok.Node != "node-a" || tok.NodeUID != "u1" || tok.ServiceAccount != "kustodian-agent" || tok.Namespace != "kustodian" || tok.Expires != 1790000000 {
		t.Fatalf("bound token: %+v %v %v", tok, ok, err)
	}
	unbound := jwt(`{"kubernetes.io":{"namespace":"kustodian","serviceaccount":{"name":"x"}}}`)
	if tok, ok, err := ParseToken(unbound); err != nil || !ok || tok.Node != "" {
		t.Errorf("unbound token: %+v %v %v", tok, ok, err)
	}
	if _, ok, err := ParseToken("static-token"); ok || err != nil {
		t.Errorf("a static token: ok=%v err=%v", ok, err)
	}
	if tok, err := BoundNode(&rest.Config{BearerToken: bound}); err != nil || tok.Node != "node-a" {
		t.Errorf("BoundNode: %+v %v", tok, err)
	}
	if tok, err := BoundNode(&rest.Config{}); err != nil || tok.Node != "" {
		t.Errorf("BoundNode without a token: %+v %v", tok, err)
	}
}
