package drain

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kustodian/kustodian/internal/config"
)

func TestPDBOf(t *testing.T) {
	tooMany := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	tooMany.ErrStatus.Details.Causes = []metav1.StatusCause{{
		Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget web needs 5 healthy pods and has 5 currently",
	}}
	if got := pdbOf(tooMany); got != "PDB web" {
		t.Errorf("pdbOf = %q, want PDB web", got)
	}
	wrapped := fmt.Errorf("evicting: %w", tooMany)
	if got := pdbOf(wrapped); got != "PDB web" {
		t.Errorf("pdbOf(wrapped) = %q", got)
	}
	if got := pdbOf(apierrors.NewTooManyRequests("slow down", 1)); got != "a PodDisruptionBudget" {
		t.Errorf("pdbOf without cause = %q", got)
	}
}

func TestSummary(t *testing.T) {
	for _, tc := range []struct {
		pods    []podState
		refused []string
		want    string
	}{
		{[]podState{{key: "shop/web-1", blocked: "blocked by PDB web"}, {key: "shop/web-0", evicted: true}, {key: "shop/db-0", blocked: "blocked by PDB db"}},
			nil, "draining: 3 pods left, shop/db-0 blocked by PDB db (+1 more blocked)"},
		{[]podState{{key: "a/x", evicted: true}}, nil, "draining: 1 pod left, waiting for a/x to terminate"},
		{[]podState{{key: "a/x", evicted: true}, {key: "a/y", evicted: true}}, nil, "draining: 2 pods left, waiting for a/x and 1 more to terminate"},
		{nil, refusedPods(fmt.Errorf("cannot delete Pods that declare no controller (use --force to override): default/bare, default/bare2")),
			"draining: 2 pods left, default/bare refused: cannot delete Pods that declare no controller (set drain.force to override) (+1 more refused)"},
	} {
		pods := map[types.UID]*podState{}
		for i := range tc.pods {
			pods[types.UID(fmt.Sprint(i))] = &tc.pods[i]
		}
		if got := summary(pods, tc.refused); got != tc.want {
			t.Errorf("summary:\n got %q\nwant %q", got, tc.want)
		}
	}
}

// The API server away for a while fails no drain: a watch or a list of the
// node's pods that fails is tried again, and said in the progress.
func TestDrainRidesOutAnUnreachableAPIServer(t *testing.T) {
	apiRetry = time.Millisecond
	t.Cleanup(func() { apiRetry = time.Second })
	client := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}})
	refused := errors.New(`Get "https://127.0.0.1:6443/api/v1/pods": dial tcp 127.0.0.1:6443: connect: connection refused`)
	watches, lists := 0, 0
	client.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		watches++
		if watches <= 2 {
			return true, nil, refused
		}
		return false, nil, nil
	})
	client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		lists++
		if lists <= 2 {
			return true, nil, refused
		}
		return false, nil, nil
	})
	d := &Drainer{Client: client, Log: slog.New(slog.DiscardHandler)}
	var said []string
	if _, err := d.Drain(t.Context(), "n1", func(p Progress) { said = append(said, p.Message) }); err != nil {
		t.Fatalf("Drain: %v (progress %q)", err, said)
	}
	if watches < 3 || lists < 3 {
		t.Errorf("watches %d, lists %d: want the failed ones tried again", watches, lists)
	}
	var retried bool
	for _, m := range said {
		retried = retried || strings.Contains(m, "connection refused; trying again")
	}
	if !retried || said[len(said)-1] != "drained" {
		t.Errorf("progress %q: want the refusals said, then drained", said)
	}
}

// drain.timeout still ends a drain whose API server does not come back.
func TestDrainTimesOutWithTheAPIServerAway(t *testing.T) {
	apiRetry = time.Millisecond
	t.Cleanup(func() { apiRetry = time.Second })
	client := fake.NewClientset()
	client.PrependWatchReactor("pods", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, nil, errors.New("connection refused")
	})
	d := &Drainer{Client: client, Log: slog.New(slog.DiscardHandler), Settings: config.Drain{Timeout: 50 * time.Millisecond}}
	_, err := d.Drain(t.Context(), "n1", func(Progress) {})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("Drain: %v, want ErrTimeout", err)
	}
}
