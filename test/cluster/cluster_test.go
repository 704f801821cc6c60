package cluster

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestUpRefusesATakenPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port

	_, err = Up(t.Context(), Options{Name: "port-taken", Workdir: t.TempDir(), BinDir: t.TempDir(), APIServerPort: port})
	if err == nil || !strings.Contains(err.Error(), "port 127.0.0.1:"+strconv.Itoa(port)+" is taken") {
		t.Fatalf("Up on a taken port: got %v, want an error naming the port", err)
	}
}

func TestUpFailsClearlyWithoutBinaries(t *testing.T) {
	work := t.TempDir()
	_, err := Up(t.Context(), Options{Name: "no-binaries", Workdir: work, BinDir: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "kwokctl create cluster no-binaries failed") {
		t.Fatalf("Up without binaries: got %v, want a one-line error naming the failed step", err)
	}
	if _, err := os.Stat(filepath.Join(work, "clusters", "no-binaries")); !os.IsNotExist(err) {
		t.Errorf("a failed Up left its cluster directory behind: %v", err)
	}
}

// Up is idempotent, and Down leaves no process of the cluster running.
func TestUpReuseDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	opts := Options{Name: "lifecycle-" + strconv.Itoa(os.Getpid()), Nodes: 2, Log: testLog{t}}
	t.Cleanup(func() { _ = Down(context.Background(), opts) })

	c, err := Up(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := Eventually(ctx, DefaultTimeout, func(ctx context.Context) error {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, NodeName(i), metav1.GetOptions{})
			if err == nil && !NodeReady(node) {
				return os.ErrNotExist
			}
			return err
		}); err != nil {
			t.Fatalf("node %s not Ready: %v", NodeName(i), err)
		}
	}
	o := opts
	o.defaults()
	pids := recordedPIDs(o.clusterDir())
	if len(pids) < 5 {
		t.Fatalf("kwokctl recorded %d component PIDs (%v), want etcd, apiserver, controller manager, scheduler and kwok", len(pids), pids)
	}

	again, err := Up(ctx, opts)
	if err != nil {
		t.Fatalf("second Up: %v", err)
	}
	if again.Config.Host != c.Config.Host {
		t.Errorf("second Up started a new server %s instead of reusing %s", again.Config.Host, c.Config.Host)
	}
	if got := recordedPIDs(o.clusterDir()); !equalInts(got, pids) {
		t.Errorf("second Up changed the component PIDs from %v to %v", pids, got)
	}

	if err := Down(ctx, opts); err != nil {
		t.Fatal(err)
	}
	for _, pid := range pids {
		if processAlive(pid) && !isZombie(pid) {
			t.Errorf("process %d of the cluster still runs after Down", pid)
		}
	}
	if _, err := os.Stat(o.clusterDir()); !os.IsNotExist(err) {
		t.Errorf("Down left %s behind", o.clusterDir())
	}
	if err := Down(ctx, opts); err != nil {
		t.Errorf("Down of a cluster that is gone: %v", err)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
