package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admv1 "k8s.io/api/admissionregistration/v1"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kustodian/kustodian/internal/identity"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/metrics"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// tokenSoak is how long TestANodeRenewsItsOwnToken keeps its agent
// working on tokens of 10 minutes: KUSTODIAN_TOKEN_SOAK (make
// test-tokens: an hour), else just past the first token's end.
func tokenSoak(t *testing.T) time.Duration {
	s := os.Getenv("KUSTODIAN_TOKEN_SOAK")
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("KUSTODIAN_TOKEN_SOAK=%s: %v", s, err)
	}
	return d
}

// A node whose kubeconfig holds a token of 10 minutes (the shortest the
// API server issues) renews it itself and keeps working after it expired,
// as long as the test lasts; a node whose renewals are refused says so
// (Event, metric) before its token expires.
func TestANodeRenewsItsOwnToken(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)
	a, b := nodes[0], nodes[1]
	nodecreds.Install(e, e.Namespace)
	soak := tokenSoak(t)
	start := time.Now()
	dir := t.TempDir()
	kubeconfig := func(node string) (string, string) {
		path := filepath.Join(dir, node+".kubeconfig")
		mustCtl(t, e, "kubeconfig", node, "--output-file", path, "--duration", "10m")
		cfg, err := clientcmd.LoadFromFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return path, cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo].Token
	}
	pathA, firstA := kubeconfig(a)
	pathB, _ := kubeconfig(b)
	denyRenewals(t, e, b)

	pa := newAgent(t, e, a, "--kubeconfig", pathA, "--stay")
	pb := newAgent(t, e, b, "--kubeconfig", pathB, "--stay")
	pa.start()
	pb.start()

	// B: due at 6m40s, refused, and said so before its token's end.
	e.Eventually("a TokenRenewalFailed Event about "+b, 9*time.Minute, func(ctx context.Context) error {
		evs, err := e.Client.CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + b + ",reason=TokenRenewalFailed"})
		if err != nil {
			return err
		}
		if len(evs.Items) != 1 || evs.Items[0].Type != corev1.EventTypeWarning || !strings.Contains(evs.Items[0].Message, "its renewal failed") ||
			!strings.Contains(evs.Items[0].Message, "kustodian-test-deny") {
			return fmt.Errorf("%d Events: %+v", len(evs.Items), evs.Items)
		}
		return nil
	})
	if m, _, err := metrics.Read(pb.spec.StateDir()); err != nil || m.TokenRenewals[metrics.ResultFailed] == 0 || m.TokenRenewals[metrics.ResultSucceeded] != 0 {
		t.Errorf("B's metrics count renewals %v (%v)", m.TokenRenewals, err)
	}

	// A: its first token expires (the API server refuses it), and A still
	// does a maintenance through the queue, with a token it renewed.
	e.Eventually("the API server refuses A's first token", 13*time.Minute, func(ctx context.Context) error {
		err := reviewToken(ctx, e, firstA)
		if apierrors.IsUnauthorized(err) {
			return nil
		}
		return fmt.Errorf("the first token: %v", err)
	})
	maintain := func(reason string) {
		t.Helper()
		pa.request(reason)
		pa.waitInProgress(cluster.DefaultTimeout)
		pa.finish()
		waitRecord(e, a, "back to Idle after "+reason, func(r *lock.Record) error {
			if r != nil {
				return fmt.Errorf("state %s", r.State)
			}
			return nil
		})
	}
	maintain("after-the-first-token")
	// With a soak, A goes on for the whole soak, until its token in use
	// was issued after the soak's end less a lifetime: renewed again and
	// again; then it does a maintenance.
	if soak > 0 {
		e.Eventually(fmt.Sprintf("A's token renewed after %s", soak), soak+5*time.Minute, func(context.Context) error {
			if worked := time.Since(start); worked < soak {
				return fmt.Errorf("A has worked %s of %s", worked.Round(time.Second), soak)
			}
			tok := stateToken(t, pa)
			if issued := time.Unix(tok.Issued, 0); issued.Before(start.Add(soak - 10*time.Minute)) {
				return fmt.Errorf("the token in use was issued %s after the start", issued.Sub(start).Round(time.Second))
			}
			return nil
		})
		maintain("after-the-soak")
	}
	tok := stateToken(t, pa)
	if err := reviewToken(e.Ctx, e, tok.Raw); err != nil || tok.Node != a || tok.Raw == firstA {
		t.Errorf("A's token in use (node %s, issued %s after the start): %v", tok.Node, time.Unix(tok.Issued, 0).Sub(start).Round(time.Second), err)
	}
	renewals := strings.Count(pa.logText(), "renewed the node's token")
	t.Logf("A worked %s on tokens of 10 minutes, renewed %d times", time.Since(start).Round(time.Second), renewals)
	if !pa.running() {
		t.Error("A's agent exited")
	}
}

// denyRenewals makes the API server refuse every TokenRequest made with
// node's token: a ValidatingAdmissionPolicy of the test's own.
func denyRenewals(t *testing.T, e *cluster.Env, node string) {
	t.Helper()
	name := "kustodian-test-deny-" + node
	fail := admv1.Fail
	p := &admv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: admv1.ValidatingAdmissionPolicySpec{
		FailurePolicy: &fail,
		MatchConstraints: &admv1.MatchResources{ResourceRules: []admv1.NamedRuleWithOperations{{RuleWithOperations: admv1.RuleWithOperations{
			Operations: []admv1.OperationType{admv1.Create},
			Rule:       admv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"serviceaccounts/token"}}}}}},
		Validations: []admv1.Validation{{Expression: fmt.Sprintf("request.userInfo.?extra[?'%s'].orValue([]) != ['%s']", identity.ExtraNodeName, node),
			Message: name + " refuses it"}},
	}}
	adm := e.Client.AdmissionregistrationV1()
	if _, err := adm.ValidatingAdmissionPolicies().Create(e.Ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = adm.ValidatingAdmissionPolicies().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	bind := &admv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: admv1.ValidatingAdmissionPolicyBindingSpec{
		PolicyName: name, ValidationActions: []admv1.ValidationAction{admv1.Deny}}}
	if _, err := adm.ValidatingAdmissionPolicyBindings().Create(e.Ctx, bind, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = adm.ValidatingAdmissionPolicyBindings().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// reviewToken asks the API server who token is (a SelfSubjectReview made
// with it): nil when it takes it.
func reviewToken(ctx context.Context, e *cluster.Env, token string) error {
	c := rest.AnonymousClientConfig(e.Config)
	c.BearerToken = token
	client, err := kubernetes.NewForConfig(c)
	if err != nil {
		return err
	}
	_, err = client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	return err
}

// stateToken is the token the agent keeps in its state directory.
func stateToken(t *testing.T, p *agentProc) identity.Token {
	t.Helper()
	b, err := os.ReadFile(identity.TokenFile(p.spec.StateDir()))
	if err != nil {
		t.Fatal(err)
	}
	tok, ok, err := identity.ParseToken(string(b))
	if err != nil || !ok {
		t.Fatalf("the token in %s: %v", p.spec.StateDir(), err)
	}
	return tok
}
