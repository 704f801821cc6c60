package ctl

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The API server's answers, as its eviction REST storage makes them.
func budgetRefusal() error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes,
		metav1.StatusCause{Type: policyv1.DisruptionBudgetCause, Message: "The disruption budget web needs 2 healthy pods and has 2 currently"})
	return err
}

func TestRefusedEvictions(t *testing.T) {
	pod := func(name string, mod func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"}, Spec: corev1.PodSpec{NodeName: "n1"}}
		if mod != nil {
			mod(p)
		}
		return p
	}
	objects := []runtime.Object{
		pod("web-1", nil), pod("twice", nil), pod("free", nil),
		pod("ds", func(p *corev1.Pod) {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: "DaemonSet", Name: "agent", Controller: ptrTrue()}}
		}),
		pod("static", func(p *corev1.Pod) { p.Annotations = map[string]string{corev1.MirrorPodAnnotationKey: "x"} }),
		pod("done", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
	}
	answers := map[string]error{
		"web-1": budgetRefusal(),
		"twice": apierrors.NewInternalError(errors.New("This pod has more than one PodDisruptionBudget, which the eviction subresource does not support.")),
	}
	run := func(answers map[string]error) ([]RefusedEviction, []string, error) {
		client := fake.NewSimpleClientset(objects...)
		var asked []string
		client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() != "eviction" {
				return false, nil, nil
			}
			ev := a.(k8stesting.CreateAction).GetObject().(*policyv1.Eviction)
			if ev.DeleteOptions == nil || len(ev.DeleteOptions.DryRun) != 1 || ev.DeleteOptions.DryRun[0] != metav1.DryRunAll {
				t.Errorf("eviction of %s sent without dryRun=All: %+v", ev.Name, ev.DeleteOptions)
			}
			asked = append(asked, ev.Name)
			return true, nil, answers[ev.Name]
		})
		refused, err := refusedEvictions(context.Background(), client, "n1")
		return refused, asked, err
	}
	refused, asked, err := run(answers)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(asked, ",") != "free,twice,web-1" {
		t.Errorf("asked about %v, want the pods a drain evicts (not the DaemonSet's, the static or the finished pod)", asked)
	}
	if len(refused) != 2 || refused[0].Pod != "shop/twice" || refused[1].Pod != "shop/web-1" ||
		!strings.Contains(refused[1].Reason, "needs 2 healthy pods") || !strings.Contains(refused[0].Reason, "more than one") {
		t.Errorf("refused %+v, want twice (two budgets) and web-1 (its budget, named)", refused)
	}
	// Flow control's 429 and any other 500 are errors, not refusals.
	for name, answer := range map[string]error{
		"throttled": apierrors.NewTooManyRequests("the server has received too many requests", 1),
		"internal":  apierrors.NewInternalError(errors.New("etcdserver: request timed out")),
		"forbidden": apierrors.NewForbidden(policyv1.Resource("pods/eviction"), "free", errors.New("no")),
	} {
		if _, _, err := run(map[string]error{"free": answer}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func ptrTrue() *bool { b := true; return &b }
