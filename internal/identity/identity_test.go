package identity

import (
	"context"
	"encoding/base64"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
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

// Review takes the node from the API server's answer: a token bound to a
// Node names it; one bound to a Pod (which carries its node's name too)
// and a plain user do not.
func TestReview(t *testing.T) {
	for name, tc := range map[string]struct {
		extra    map[string]authnv1.ExtraValue
		node, id string
	}{
		"bound to a Node": {map[string]authnv1.ExtraValue{ExtraNodeName: {"n1"}, ExtraNodeUID: {"uid-1"}}, "n1", "uid-1"},
		"bound to a Pod":  {map[string]authnv1.ExtraValue{ExtraNodeName: {"n1"}, ExtraNodeUID: {"uid-1"}, ExtraPodName: {"p"}}, "", ""},
		"an admin":        {nil, "", ""},
	} {
		t.Run(name, func(t *testing.T) {
			client := fake.NewClientset()
			client.PrependReactor("create", "selfsubjectreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, &authnv1.SelfSubjectReview{Status: authnv1.SelfSubjectReviewStatus{UserInfo: authnv1.UserInfo{
					Username: "system:serviceaccount:kustodian:kustodian-agent", Extra: tc.extra}}}, nil
			})
			u, err := Review(context.Background(), client)
			if err != nil || u.Node != tc.node || u.NodeUID != tc.id || u.Name != "system:serviceaccount:kustodian:kustodian-agent" {
				t.Errorf("%+v %v, want node %q uid %q", u, err, tc.node, tc.id)
			}
		})
	}
}
