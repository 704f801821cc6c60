package ctl

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kustodian/kustodian/internal/nodemarks"
)

func TestReportKubeletEvictions(t *testing.T) {
	var objs []runtime.Object
	node := func(name, label string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
		if label != "" {
			n.Labels[nodemarks.LabelKubeletEvictions] = label
		}
		return n
	}
	objs = append(objs, node("a", "ready"), node("b", "ready"), node("c", "unready"), node("d", ""))
	for i := range 12 {
		objs = append(objs, node(fmt.Sprintf("u%02d", i), "unready"))
	}
	client := fake.NewClientset(objs...)
	var out bytes.Buffer
	if err := reportKubeletEvictions(context.Background(), &out, client); err != nil {
		t.Fatal(err)
	}
	want := "kubelet evictions: 2 node(s) ready; 13 not, whose agents could not drain them (kustodian doctor on each says why): c, u00, u01, u02, u03, u04, u05, u06, u07, u08 and 3 more; 1 not known (no agent has started there since it could say): d\n"
	if out.String() != want {
		t.Errorf("got  %q\nwant %q", out.String(), want)
	}
}
