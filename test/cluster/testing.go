package cluster

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kustodian/kustodian/test/buildbin"
)

// EnvKubeconfig names a running cluster's kubeconfig for tests to reuse (for
// example the one `make cluster-up` prints). Unset, each `go test` process
// starts its own cluster and deletes it at the end.
const EnvKubeconfig = "KUSTODIAN_TEST_KUBECONFIG"

const testClusterPrefix = "kustodian-test-"

var shared struct {
	sync.Mutex
	config     *rest.Config
	client     kubernetes.Interface
	kubeconfig string
}

// Main is TestMain for packages of integration tests: it starts (or reuses)
// one control plane for the whole test binary, runs the tests and stops it.
// When the control plane cannot start, every test fails: none is skipped.
//
//	func TestMain(m *testing.M) { cluster.Main(m) }
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	defer buildbin.Remove()

	if path := os.Getenv(EnvKubeconfig); path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: %s=%s: %v\n", EnvKubeconfig, path, err)
			return 1
		}
		cfg.QPS, cfg.Burst = 200, 400
		c := &Cluster{Name: "external", Kubeconfig: path, Config: cfg, Client: kubernetes.NewForConfigOrDie(cfg)}
		if err := c.waitHealthy(ctx, time.Minute); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: the cluster of %s=%s: %v\n", EnvKubeconfig, path, err)
			return 1
		}
		setShared(c)
		return m.Run()
	}

	opts := Options{Name: testClusterPrefix + strconv.Itoa(os.Getpid()), Log: os.Stderr}
	opts.defaults()
	reapStaleTestClusters(ctx, opts)
	c, err := Up(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: cannot start the control plane: %v\n", err)
		return 1
	}
	setShared(c)
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "control-plane logs: %s\n", filepath.Join(c.Workdir, "clusters", c.Name, "logs"))
		if keep := os.Getenv("KUSTODIAN_KEEP_CLUSTER"); keep != "" {
			fmt.Fprintf(os.Stderr, "keeping cluster %s (kubeconfig %s)\n", c.Name, c.Kubeconfig)
			return code
		}
	}
	if err := Down(context.Background(), opts); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: stopping the control plane: %v\n", err)
		return 1
	}
	return code
}

// reapStaleTestClusters deletes test clusters whose test process has died
// (killed by a timeout, say) so that they do not pile up.
func reapStaleTestClusters(ctx context.Context, opts Options) {
	dirs, _ := filepath.Glob(filepath.Join(opts.Workdir, "clusters", testClusterPrefix+"*"))
	for _, dir := range dirs {
		name := filepath.Base(dir)
		pid, err := strconv.Atoi(strings.TrimPrefix(name, testClusterPrefix))
		if err != nil || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		fmt.Fprintf(opts.Log, "deleting stale test cluster %s (its test process is gone)\n", name)
		stale := opts
		stale.Name = name
		if err := Down(ctx, stale); err != nil {
			fmt.Fprintf(opts.Log, "deleting %s: %v\n", name, err)
		}
	}
}

func processAlive(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

func setShared(c *Cluster) {
	shared.Lock()
	defer shared.Unlock()
	shared.config = c.Config
	shared.client = c.Client
	shared.kubeconfig = c.Kubeconfig
}

// shortID names a test's objects: short, stable for one test, distinct
// between tests (and between runs against a reused cluster).
func shortID(t testing.TB) string {
	sum := sha256.Sum256([]byte(t.Name() + strconv.FormatInt(time.Now().UnixNano(), 10)))
	return "t" + hex.EncodeToString(sum[:])[:7]
}
