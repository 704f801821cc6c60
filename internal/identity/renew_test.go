package identity

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
)

// bound is a token of kustodian/kustodian-agent bound to node (uid),
// issued at iat for life.
func bound(node, uid string, iat time.Time, life time.Duration) string {
	return boundSA("sa1", node, uid, iat, life)
}

// boundSA is bound for the ServiceAccount whose UID is sa.
func boundSA(sa, node, uid string, iat time.Time, life time.Duration) string {
	return jwt(fmt.Sprintf(`{"iss":"https://kubernetes.default.svc","iat":%d,"exp":%d,"kubernetes.io":{"namespace":"kustodian","node":{"name":%q,"uid":%q},"serviceaccount":{"name":"kustodian-agent","uid":%q}}}`,
		iat.Unix(), iat.Add(life).Unix(), node, uid, sa))
}

func mustParse(t *testing.T, s string) Token {
	t.Helper()
	tok, ok, err := ParseToken(s)
	if err != nil || !ok {
		t.Fatalf("%q: %v %v", s, ok, err)
	}
	return tok
}

func TestTheRenewalIsDueAtAThirdOfTheLifetime(t *testing.T) {
	iat := time.Unix(1_800_000_000, 0)
	tok := mustParse(t, bound("n1", "u1", iat, 600*time.Second))
	if tok.Lifetime() != 10*time.Minute || !tok.RenewAt().Equal(iat.Add(400*time.Second)) || !tok.LateAt().Equal(iat.Add(450*time.Second)) {
		t.Errorf("lifetime %s, renew at +%s, late at +%s", tok.Lifetime(), tok.RenewAt().Sub(iat), tok.LateAt().Sub(iat))
	}
	if RetryAfter(tok) != 10*time.Second || RetryAfter(mustParse(t, bound("n1", "u1", iat, 90*24*time.Hour))) != 10*time.Minute {
		t.Errorf("retries: %s", RetryAfter(tok))
	}
	if (Token{Expires: 5}).RenewAt() != (time.Time{}) {
		t.Error("a token without iat is due")
	}
}

func TestTheRenewedTokenIsUsedOnlyWhenItIsTheSameNodesAndNewer(t *testing.T) {
	iat := time.Unix(1_800_000_000, 0)
	kube := bound("n1", "u1", iat, time.Hour)
	for _, tc := range []struct {
		name, file string
		renewed    bool
	}{
		{"newer, same node", bound("n1", "u1", iat.Add(time.Minute), time.Hour), true},
		{"older", bound("n1", "u1", iat.Add(-time.Minute), time.Hour), false},
		{"another node", bound("n2", "u1", iat.Add(time.Minute), time.Hour), false},
		{"the Node made again (another uid)", bound("n1", "u2", iat.Add(time.Minute), time.Hour), false},
		{"the ServiceAccount made again (another uid)", boundSA("sa2", "n1", "u1", iat.Add(time.Minute), time.Hour), false},
		// A kubeconfig minted after the renewal wins, even a shorter one.
		{"issued before, expiring later", bound("n1", "u1", iat.Add(-time.Minute), 2*time.Hour), false},
		{"no file", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), TokenFileName)
			if tc.file != "" {
				if err := os.WriteFile(file, []byte(tc.file+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			c := &rest.Config{BearerToken: kube}
			tok, err := UseRenewed(c, file, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.BearerTokenFile == file; got != tc.renewed || (tc.renewed && (c.BearerToken != "" || tok.Raw != tc.file)) || (!tc.renewed && tok.Raw != kube) {
				t.Errorf("renewed %v (file %q, inline %v), token %q", got, c.BearerTokenFile, c.BearerToken != "", tok.Raw)
			}
			// Adopted: the kubeconfig's newer token goes to the file, which
			// the client reads from then on.
			c = &rest.Config{BearerToken: kube}
			if _, err := UseRenewed(c, file, true); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(file)
			if err != nil || c.BearerTokenFile != file || c.BearerToken != "" {
				t.Fatalf("adopt: file %q inline %v: %v", c.BearerTokenFile, c.BearerToken != "", err)
			}
			if want := map[bool]string{true: tc.file, false: kube}[tc.renewed]; strings.TrimSpace(string(b)) != want {
				t.Errorf("the file holds %q, want %q", b, want)
			}
		})
	}
	// A file that holds no token is passed over, and written anew.
	file := filepath.Join(t.TempDir(), TokenFileName)
	if err := os.WriteFile(file, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &rest.Config{BearerToken: kube}
	if tok, err := UseRenewed(c, file, true); err != nil || tok.Raw != kube || c.BearerTokenFile != file {
		t.Errorf("a broken token file: %v", err)
	}
	if b, _ := os.ReadFile(file); strings.TrimSpace(string(b)) != kube {
		t.Errorf("the broken file holds %q", b)
	}
}

// The renewer asks for a token of the same ServiceAccount bound to the same
// Node for the same lifetime when a third of it is left, keeps it in the
// file, and retries a failure after RetryAfter.
func TestTheRenewerRenewsWhenDueAndRetriesFailures(t *testing.T) {
	start := time.Unix(1_800_000_000, 0)
	clk := testingclock.NewFakeClock(start)
	client := fake.NewClientset()
	var mu sync.Mutex
	var asked []authv1.TokenRequest
	fail := 1 // the second request fails once
	client.PrependReactor("create", "serviceaccounts", func(action k8stesting.Action) (bool, runtime.Object, error) {
		ca := action.(k8stesting.CreateAction)
		if ca.GetSubresource() != "token" {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		tr := ca.GetObject().(*authv1.TokenRequest).DeepCopy()
		asked = append(asked, *tr)
		if len(asked) == 2 && fail > 0 {
			fail--
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "serviceaccounts/token"}, "kustodian-agent", errors.New(`User "x" cannot create resource "serviceaccounts/token"`))
		}
		tr.Status.Token = bound(tr.Spec.BoundObjectRef.Name, string(tr.Spec.BoundObjectRef.UID), clk.Now(), time.Duration(*tr.Spec.ExpirationSeconds)*time.Second)
		return true, tr, nil
	})
	file := filepath.Join(t.TempDir(), TokenFileName)
	renewed, failed := make(chan Token, 4), make(chan error, 4)
	r := &Renewer{Client: client, File: file, Clock: clk,
		Renewed: func(t Token) { renewed <- t },
		Failed:  func(err error, _ Token, _ time.Duration) { failed <- err }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { r.Run(ctx, mustParse(t, bound("n1", "u1", start, 600*time.Second))); close(done) }()

	step := func(to time.Time) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !clk.HasWaiters() {
			if time.Now().After(deadline) {
				t.Fatal("the renewer does not wait")
			}
			time.Sleep(time.Millisecond)
		}
		clk.SetTime(to)
	}
	step(start.Add(399 * time.Second)) // not due yet: it waits on
	step(start.Add(400 * time.Second))
	first := <-renewed
	if first.Node != "n1" || first.NodeUID != "u1" || first.Lifetime() != 10*time.Minute {
		t.Errorf("the renewed token: %+v", first)
	}
	if b, _ := os.ReadFile(file); strings.TrimSpace(string(b)) != first.Raw {
		t.Errorf("the file holds %q", b)
	}
	// Due again a third before its own end; that try fails, and the next,
	// RetryAfter (10 s) later, succeeds.
	step(first.RenewAt())
	if err := <-failed; !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "kustodian-ctl install") {
		t.Errorf("the failure: %v", err)
	}
	step(first.RenewAt().Add(10 * time.Second))
	second := <-renewed
	if second.Expires <= first.Expires {
		t.Errorf("the second token expires %d, the first %d", second.Expires, first.Expires)
	}
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	for _, tr := range asked {
		ref := tr.Spec.BoundObjectRef
		if *tr.Spec.ExpirationSeconds != 600 || ref.Kind != "Node" || ref.APIVersion != "v1" || ref.Name != "n1" || ref.UID != "u1" || len(tr.Spec.Audiences) != 0 {
			t.Errorf("asked for %+v", tr.Spec)
		}
	}
	if len(asked) != 3 {
		t.Errorf("%d requests, want 3", len(asked))
	}
}
