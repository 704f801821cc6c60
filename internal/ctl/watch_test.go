package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/status"
	"github.com/kustodian/kustodian/internal/status/statustest"
)

// lines is a writer the test reads while the watch writes.
type lines struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lines) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Split(strings.TrimSuffix(l.b.String(), "\n"), "\n")
}

// watchJSON runs watchStatus with print on the fixture's objects, makes
// one change (n2's record says something new) once the first object is
// out, and returns the lines printed, at least two.
func watchJSON(t *testing.T, print func(io.Writer, status.MaintenanceStatus) error, rows func(status.MaintenanceStatus) []status.Node) []string {
	t.Helper()
	in := statustest.Fixture()
	objs := []runtime.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: in.Namespace}}}
	for i := range in.Leases {
		l := in.Leases[i].DeepCopy()
		l.Namespace, l.ResourceVersion = in.Namespace, ""
		objs = append(objs, l)
	}
	for i := range in.Nodes {
		objs = append(objs, in.Nodes[i].DeepCopy())
	}
	client := fake.NewClientset(objs...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out lines
	done := make(chan error, 1)
	go func() {
		done <- watchStatus(ctx, status.Reader{Client: client, Namespace: in.Namespace}, &out, outputOf(outputJSON), false, print, rows)
	}()
	waitFor := func(n int) []string {
		for {
			if got := out.get(); len(got) >= n && got[0] != "" {
				return got
			}
			select {
			case err := <-done:
				t.Fatalf("the watch ended: %v\n%s", err, strings.Join(out.get(), "\n"))
			case <-ctx.Done():
				t.Fatalf("%d lines, want %d:\n%s", len(out.get()), n, strings.Join(out.get(), "\n"))
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	waitFor(1)
	leases := client.CoordinationV1().Leases(in.Namespace)
	l, err := leases.Get(ctx, lock.RecordName("n2"), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := lock.RecordFromLease(l)
	r.Message = "waiting: something new"
	r.ApplyTo(l)
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got := waitFor(2)
	cancel()
	<-done
	return got
}

// queue -o json --watch prints a MaintenanceQueue on every line, the first
// and those after a change alike (it switched to a MaintenanceStatus from
// the second line on).
func TestQueueWatchJSONKeepsItsSchema(t *testing.T) {
	for i, line := range watchJSON(t, queuePrinter(outputOf(outputJSON)), status.MaintenanceStatus.Queue) {
		var q struct {
			Kind  string            `json:"kind"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal([]byte(line), &q); err != nil || q.Kind != "MaintenanceQueue" || len(q.Items) == 0 {
			t.Errorf("line %d is not a MaintenanceQueue (%v): %s", i+1, err, line)
		}
	}
}

// status NODE -o json --watch prints only NODE on every line (it dropped
// the filter from the second line on).
func TestStatusWatchJSONKeepsTheNodesNamed(t *testing.T) {
	for i, line := range watchJSON(t, statusPrinter(outputOf(outputJSON), []string{"n2"}, false), statusRows([]string{"n2"}, false)) {
		var s struct {
			Kind  string `json:"kind"`
			Nodes []struct {
				Name string `json:"name"`
			} `json:"nodes"`
		}
		if err := json.Unmarshal([]byte(line), &s); err != nil || s.Kind != "MaintenanceStatus" || fmt.Sprint(s.Nodes) != "[{n2}]" {
			t.Errorf("line %d is not a MaintenanceStatus of n2 alone (%v): %s", i+1, err, line)
		}
	}
}
