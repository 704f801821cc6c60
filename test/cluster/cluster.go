// Package cluster starts, reuses and stops a real local Kubernetes control
// plane for Kustodian's integration tests, the demo and `make cluster-up`:
// etcd, kube-apiserver, kube-controller-manager and kube-scheduler built from
// their Go modules (test/tools/build.sh), run as processes by kwokctl's binary
// runtime, with kwok simulating the kubelets of the nodes.
package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// NewestKubeVersion is the newest Kubernetes supported; keep it equal to
// NEWEST in test/tools/build.sh and to the k8s.io/client-go release.
const NewestKubeVersion = "v1.37.1"

// KubeVersion is the control plane's version: NewestKubeVersion, or
// KUSTODIAN_KUBE_VERSION (make test-oldest: the oldest minor supported,
// built from test/tools/k8s-1.<minor>).
var KubeVersion = func() string {
	if v := os.Getenv("KUSTODIAN_KUBE_VERSION"); v != "" {
		return v
	}
	return NewestKubeVersion
}()

// Options say which cluster to bring up and where.
type Options struct {
	// Name of the kwokctl cluster.
	Name string
	// Workdir is kwokctl's work directory (KWOK_WORKDIR); it holds the
	// clusters' files, logs and pid files. Default: WorkdirDefault().
	Workdir string
	// BinDir holds the control-plane binaries. Empty: build them with
	// test/tools/build.sh (only what is missing).
	BinDir string
	// Nodes is how many kwok nodes Up ensures, named NodeName(i). Tests make
	// their own nodes and pass 0.
	Nodes int
	// APIServerPort pins the API server's port on 127.0.0.1; 0 picks a free one.
	APIServerPort int
	// AuditPolicy, when set, is the path of an audit policy for the API
	// server; the audit log is then AuditLog().
	AuditPolicy string
	// APIServerArgs are more flags for the API server, by name without
	// the dashes.
	APIServerArgs map[string]string
	// Log receives progress and the tools' output; nil discards it.
	Log io.Writer
	// KubeletHeartbeats: kwok renews each Node's Lease and status as a
	// kubelet does (a 40 s Lease renewed every 10 s), so that the load the
	// kubelets put on a control plane is there to measure Kustodian's
	// beside (make bench). Otherwise kwokctl's default, every heartbeat
	// five times slower, which spares a loaded test machine.
	KubeletHeartbeats bool
}

// AuditLog is where the API server writes its audit log when AuditPolicy is set.
func (o Options) AuditLog() string {
	o.defaults()
	return filepath.Join(o.clusterDir(), "logs", "audit.log")
}

// PID is the process ID of one of the control plane's components
// ("kube-apiserver", "etcd", "kwok-controller"), as kwokctl recorded it.
func (o Options) PID(component string) (int, error) {
	o.defaults()
	b, err := os.ReadFile(filepath.Join(o.clusterDir(), "pids", component+".pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// Cluster is a running control plane.
type Cluster struct {
	Name       string
	Workdir    string
	Kubeconfig string
	Config     *rest.Config
	Client     kubernetes.Interface
}

// NodeName is the name Up gives the i-th node.
func NodeName(i int) string { return fmt.Sprintf("kwok-node-%d", i) }

// CacheRoot is where Kustodian's tests keep what is expensive to make
// (control-plane binaries, clusters, root file systems), outside the
// repository: $KUSTODIAN_CACHE, else $XDG_CACHE_HOME/kustodian, else
// ~/.cache/kustodian. test/tools/build.sh uses the same rule.
func CacheRoot() string {
	if d := os.Getenv("KUSTODIAN_CACHE"); d != "" {
		return d
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			home = os.TempDir()
		}
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "kustodian")
}

// WorkdirDefault is where clusters live unless told otherwise: beside the
// cached binaries, outside the repository.
func WorkdirDefault() string { return filepath.Join(CacheRoot(), "kwok") }

func (o *Options) defaults() {
	if o.Workdir == "" {
		o.Workdir = WorkdirDefault()
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
}

func (o *Options) clusterDir() string { return filepath.Join(o.Workdir, "clusters", o.Name) }
func (o *Options) kubeconfig() string { return filepath.Join(o.clusterDir(), "kubeconfig.yaml") }

// Up starts the named cluster, or reuses it when it is already running and
// healthy, and ensures its nodes. A cluster left half-started (for example by
// a crash) is deleted and created again.
func Up(ctx context.Context, opts Options) (*Cluster, error) {
	opts.defaults()
	if opts.Name == "" {
		return nil, errors.New("cluster name is empty")
	}
	if opts.BinDir == "" {
		dir, err := BuildBinaries(ctx, opts.Log)
		if err != nil {
			return nil, err
		}
		opts.BinDir = dir
	}

	if c, err := connect(opts); err == nil && c.healthy(ctx) == nil {
		fmt.Fprintf(opts.Log, "cluster %s is already running; reusing it\n", opts.Name)
		return c, c.EnsureNodes(ctx, opts.Nodes)
	}
	if _, err := os.Stat(opts.clusterDir()); err == nil {
		fmt.Fprintf(opts.Log, "cluster %s exists but does not answer; creating it again\n", opts.Name)
		if err := Down(ctx, opts); err != nil {
			return nil, err
		}
	}
	if opts.APIServerPort != 0 {
		if err := portFree(opts.APIServerPort); err != nil {
			return nil, err
		}
	}

	args := []string{"--name", opts.Name, "create", "cluster",
		"--runtime", "binary",
		"--kubeconfig", "", // never touch the user's ~/.kube/config
		"--etcd-binary", filepath.Join(opts.BinDir, "etcd"),
		"--kube-apiserver-binary", filepath.Join(opts.BinDir, "kube-apiserver"),
		"--kube-controller-manager-binary", filepath.Join(opts.BinDir, "kube-controller-manager"),
		"--kube-scheduler-binary", filepath.Join(opts.BinDir, "kube-scheduler"),
		"--kwok-controller-binary", filepath.Join(opts.BinDir, "kwok"),
		"--kube-authorization=true",
		"--kube-admission=true",
		"--wait", "2m",
	}
	if opts.KubeletHeartbeats {
		args = append(args, "--heartbeat-factor", "1")
	}
	if opts.APIServerPort != 0 {
		args = append(args, "--kube-apiserver-port", strconv.Itoa(opts.APIServerPort))
	}
	// As in production clusters: kubelets (system:node:*) may change only
	// their own Node and evict only their own pods (kwok already runs the
	// Node authorizer).
	conf := filepath.Join(opts.Workdir, opts.Name+"-kwokctl.yaml")
	if err := os.MkdirAll(opts.Workdir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(conf, []byte(kwokctlConfig(opts.APIServerArgs)), 0o644); err != nil {
		return nil, err
	}
	args = append(args, "--config", conf)
	if opts.AuditPolicy != "" {
		args = append(args, "--kube-audit-policy", opts.AuditPolicy)
	}
	fmt.Fprintf(opts.Log, "starting cluster %s (kube %s) in %s\n", opts.Name, KubeVersion, opts.clusterDir())
	start := time.Now()
	if err := os.MkdirAll(opts.Workdir, 0o755); err != nil {
		return nil, err
	}
	if out, err := kwokctl(ctx, opts, args...); err != nil {
		// Do not leave a half-started cluster behind.
		_ = Down(context.WithoutCancel(ctx), opts)
		return nil, fmt.Errorf("kwokctl create cluster %s failed (%s): %s; full output in %s",
			opts.Name, err, lastLine(out), filepath.Join(opts.Workdir, "kwokctl.log"))
	}
	c, err := connect(opts)
	if err != nil {
		return nil, err
	}
	if err := c.waitHealthy(ctx, 2*time.Minute); err != nil {
		return nil, err
	}
	fmt.Fprintf(opts.Log, "cluster %s is up in %s\n", opts.Name, time.Since(start).Round(100*time.Millisecond))
	return c, c.EnsureNodes(ctx, opts.Nodes)
}

// Running reports whether the named cluster is up and healthy.
func Running(ctx context.Context, opts Options) bool {
	opts.defaults()
	c, err := connect(opts)
	return err == nil && c.healthy(ctx) == nil
}

// Down stops the named cluster and deletes its files. It then makes sure that
// every process the cluster started is gone, stopping leftovers by the PIDs
// kwokctl recorded (never by name). A cluster that does not exist is not an error.
func Down(ctx context.Context, opts Options) error {
	opts.defaults()
	dir := opts.clusterDir()
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	pids := recordedPIDs(dir)
	if out, err := kwokctl(ctx, opts, "--name", opts.Name, "delete", "cluster"); err != nil {
		fmt.Fprintf(opts.Log, "kwokctl delete cluster %s: %v: %s\n", opts.Name, err, lastLine(out))
	}
	for _, pid := range pids {
		if err := stopPID(ctx, pid); err != nil {
			return fmt.Errorf("cluster %s: %w", opts.Name, err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("removing %s: %w", dir, err)
	}
	return nil
}

// Stop stops the cluster's processes and keeps its data; Start brings it
// back on the same ports. Tests use them to take the API server away.
func Stop(ctx context.Context, opts Options) error {
	opts.defaults()
	pids := recordedPIDs(opts.clusterDir())
	if out, err := kwokctl(ctx, opts, "--name", opts.Name, "stop", "cluster"); err != nil {
		return fmt.Errorf("kwokctl stop cluster %s: %v: %s", opts.Name, err, lastLine(out))
	}
	for _, pid := range pids {
		if err := stopPID(ctx, pid); err != nil {
			return fmt.Errorf("cluster %s: %w", opts.Name, err)
		}
	}
	return nil
}

// Start starts a stopped cluster and waits until it is healthy.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	opts.defaults()
	if out, err := kwokctl(ctx, opts, "--name", opts.Name, "start", "cluster"); err != nil {
		return nil, fmt.Errorf("kwokctl start cluster %s: %v: %s", opts.Name, err, lastLine(out))
	}
	c, err := connect(opts)
	if err != nil {
		return nil, err
	}
	return c, c.waitHealthy(ctx, 2*time.Minute)
}

// kwokctlConfig adds NodeRestriction to the API server's admission
// plugins, and the flags of extra.
func kwokctlConfig(extra map[string]string) string {
	var b strings.Builder
	b.WriteString(`apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokctlConfiguration
componentsPatches:
- name: kube-apiserver
  extraArgs:
  - key: enable-admission-plugins
    value: NodeRestriction
`)
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  - key: %s\n    value: %q\n", k, extra[k])
	}
	return b.String()
}

func kwokctl(ctx context.Context, opts Options, args ...string) ([]byte, error) {
	bin := "kwokctl"
	if opts.BinDir != "" {
		bin = filepath.Join(opts.BinDir, "kwokctl")
	} else if dir, err := BinDir(ctx); err == nil {
		bin = filepath.Join(dir, "kwokctl")
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(),
		"KWOK_WORKDIR="+opts.Workdir,
		"KWOK_KUBE_VERSION="+KubeVersion,
	)
	// kwokctl logs a JSON line per step; keep them in a file beside the
	// clusters rather than in the caller's output.
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	if f, ferr := os.OpenFile(filepath.Join(opts.Workdir, "kwokctl.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); ferr == nil {
		fmt.Fprintf(f, "# kwokctl %s\n", strings.Join(args, " "))
		_, _ = f.Write(out.Bytes())
		_ = f.Close()
	}
	return out.Bytes(), err
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

func connect(opts Options) (*Cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", opts.kubeconfig())
	if err != nil {
		return nil, fmt.Errorf("reading kubeconfig of cluster %s: %w", opts.Name, err)
	}
	// Tests and the demo run many clients against one server; client-go's
	// default limit (5 qps) would make them wait on themselves.
	cfg.QPS, cfg.Burst = 200, 400
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Cluster{Name: opts.Name, Workdir: opts.Workdir, Kubeconfig: opts.kubeconfig(), Config: cfg, Client: client}, nil
}

// healthy reports whether the API server is ready and the controller manager
// works (it creates the default ServiceAccount of every namespace).
func (c *Cluster) healthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	body, err := c.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("API server %s is not ready: %w", c.Config.Host, err)
	}
	if strings.TrimSpace(string(body)) != "ok" {
		return fmt.Errorf("API server %s is not ready: %s", c.Config.Host, body)
	}
	if _, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
		return fmt.Errorf("controller manager has not created default/default ServiceAccount yet: %w", err)
	}
	return nil
}

func (c *Cluster) waitHealthy(ctx context.Context, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last = c.healthy(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("cluster %s did not become healthy within %s: %v", c.Name, timeout, last)
	}
	return nil
}

// EnsureNodes creates the nodes NodeName(0..n-1) that do not exist yet.
func (c *Cluster) EnsureNodes(ctx context.Context, n int) error {
	for i := range n {
		if err := CreateNode(ctx, c.Client, NodeName(i), nil); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// CreateNode registers a Node that kwok will run as a simulated kubelet:
// it becomes Ready, accepts pods, runs them and deletes them on eviction.
func CreateNode(ctx context.Context, client kubernetes.Interface, name string, labels map[string]string) error {
	l := map[string]string{
		"kubernetes.io/hostname": name,
		"kubernetes.io/os":       "linux",
		"kubernetes.io/arch":     "amd64",
		"type":                   "kwok",
	}
	for k, v := range labels {
		l[k] = v
	}
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      l,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
	_, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating node %s: %w", name, err)
	}
	return err
}
