// Package kuredproc runs Kured's own binary (make kured) for the interop
// tests, each instance sandboxed: PID 1 of a PID and mount namespace of
// its own (unshare), so that its nsenter -m/proc/1/ns/mnt reaches the
// sandbox, never this machine; the in-cluster credentials Kured reads are
// on a tmpfs over /run in that namespace alone; its reboot command only
// leaves a mark the test can see.
package kuredproc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/kustodian/kustodian/test/cluster"
)

// Config is one Kured instance.
type Config struct {
	Binary      string // Kured's binary
	Node        string // --node-id
	DSNamespace string // where Kured's DaemonSet (and its lock) is
	APIHost     string // the API server, as in-cluster config finds it
	APIPort     int
	Token       []byte // a token of Kured's ServiceAccount
	CA          []byte // the API server's CA
	Period      time.Duration
	Concurrency int
	Dir         string   // the instance's files: sentinel, reboot mark, log
	Args        []string // more of Kured's flags
}

// Kured is a running instance.
type Kured struct {
	cfg  Config
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	log  bytes.Buffer
}

// Sentinel is the file whose presence tells Kured a reboot is required.
func (c Config) Sentinel() string { return filepath.Join(c.Dir, "reboot-required") }

// Mark is the file Kured's reboot command creates.
func (c Config) Mark() string { return filepath.Join(c.Dir, "rebooted") }

// script makes the sandbox and runs Kured in it ("$0": the files' directory).
const script = `set -e
mount -t tmpfs kured-sandbox /run
sa=/run/secrets/kubernetes.io/serviceaccount
mkdir -p $sa
cp "$0/token" "$0/ca.crt" "$0/namespace" $sa/
exec "$@"`

// Start starts Kured in its sandbox.
func Start(cfg Config) (*Kured, error) {
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, err
	}
	for name, b := range map[string][]byte{"token": cfg.Token, "ca.crt": cfg.CA, "namespace": []byte(cfg.DSNamespace)} {
		if err := os.WriteFile(filepath.Join(cfg.Dir, name), b, 0o600); err != nil {
			return nil, err
		}
	}
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{"--fork", "--kill-child", "--pid", "--mount", "--mount-proc", "--propagation", "private", "/bin/sh", "-c", script, cfg.Dir,
		cfg.Binary, "--node-id=" + cfg.Node, "--ds-namespace=" + cfg.DSNamespace, "--ds-name=kured",
		"--period=" + cfg.Period.String(), "--reboot-sentinel=" + cfg.Sentinel(),
		"--reboot-command=/bin/touch " + cfg.Mark(), "--log-format=text",
		// Kured serves its metrics on :8080 by default: each instance
		// gets a port of its own on the loopback.
		"--metrics-host=127.0.0.1", "--metrics-port=" + strconv.Itoa(port)}
	if cfg.Concurrency > 1 {
		args = append(args, "--concurrency="+strconv.Itoa(cfg.Concurrency))
	}
	args = append(args, cfg.Args...)
	k := &Kured{cfg: cfg, done: make(chan struct{})}
	k.cmd = exec.Command("unshare", args...)
	k.cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST="+cfg.APIHost, "KUBERNETES_SERVICE_PORT="+strconv.Itoa(cfg.APIPort))
	w := &lockedWriter{k: k}
	k.cmd.Stdout, k.cmd.Stderr = w, w
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := k.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting Kured for %s: %w", cfg.Node, err)
	}
	go func() { _ = k.cmd.Wait(); close(k.done) }()
	return k, nil
}

// FreePort is a TCP port free on 127.0.0.1 now, for Kured's metrics.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

type lockedWriter struct{ k *Kured }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.k.mu.Lock()
	defer w.k.mu.Unlock()
	return w.k.log.Write(p)
}

// Log is what Kured printed so far.
func (k *Kured) Log() string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.log.String()
}

// Sentinel is the file whose presence tells this Kured a reboot is required.
func (k *Kured) Sentinel() string { return k.cfg.Sentinel() }

// Rebooted reports whether Kured ran its reboot command.
func (k *Kured) Rebooted() bool {
	_, err := os.Stat(k.cfg.Mark())
	return err == nil
}

// Stop kills the sandbox (its PID 1, and with it every process in it) by
// the PID this package started, and waits for it.
func (k *Kured) Stop() {
	select {
	case <-k.done:
		return
	default:
	}
	_ = k.cmd.Process.Kill()
	<-k.done
}

// Exited reports whether the sandbox ended by itself.
func (k *Kured) Exited() bool {
	select {
	case <-k.done:
		return true
	default:
		return false
	}
}

// Credentials gives the ServiceAccount kured of namespace Kured's own RBAC
// (once per test) and returns a token of it and the API server's CA, as a
// Kured pod would find them.
func Credentials(t testing.TB, e *cluster.Env, namespace string) (token, ca []byte) {
	t.Helper()
	_, err := e.Client.CoreV1().ServiceAccounts(namespace).Get(e.Ctx, "kured", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		var remove func()
		if remove, err = Grant(e.Ctx, e.Client, namespace, "kured-"+e.ID+"-"+namespace); err == nil {
			t.Cleanup(func() {
				remove()
				if namespace == e.Namespace {
					return
				}
				_ = e.Client.CoreV1().ServiceAccounts(namespace).Delete(context.Background(), "kured", metav1.DeleteOptions{})
			})
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if token, err = Token(e.Ctx, e.Client, namespace); err != nil {
		t.Fatal(err)
	}
	ca = e.Config.CAData
	if len(ca) == 0 {
		if ca, err = os.ReadFile(e.Config.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	return token, ca
}

// Grant makes the ServiceAccount kured of namespace and gives it the rights
// of Kured's own manifests through a ClusterRole and its binding named
// name. remove deletes the role and the binding (not the ServiceAccount).
func Grant(ctx context.Context, client kubernetes.Interface, namespace, name string) (remove func(), err error) {
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "kured"}}
	if _, err := client.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating ServiceAccount %s/kured: %w", namespace, err)
	}
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "delete", "get"}},
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets"}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{""}, Resources: []string{"pods/eviction"}, Verbs: []string{"create"}},
	}
	rbac := client.RbacV1()
	remove = func() {
		ctx := context.Background()
		_ = rbac.ClusterRoleBindings().Delete(ctx, name, metav1.DeleteOptions{})
		_ = rbac.ClusterRoles().Delete(ctx, name, metav1.DeleteOptions{})
	}
	if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		return nil, fmt.Errorf("creating ClusterRole %s: %w", name, err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "kured", Namespace: namespace}}}, metav1.CreateOptions{}); err != nil {
		remove()
		return nil, fmt.Errorf("creating ClusterRoleBinding %s: %w", name, err)
	}
	return remove, nil
}

// Token is a token of the ServiceAccount kured of namespace, for an hour.
func Token(ctx context.Context, client kubernetes.Interface, namespace string) ([]byte, error) {
	seconds := int64(3600)
	tr, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, "kured",
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("a token of ServiceAccount %s/kured: %w", namespace, err)
	}
	return []byte(tr.Status.Token), nil
}

// Holders are the nodes in a value of Kured's lock annotation, in either of
// Kured's formats (one owner: {"nodeID":...}; several:
// {"maxOwners":N,"locks":[...]}), read with the tests' own decoding, not
// Kustodian's. An empty value holds no node.
func Holders(value string) ([]string, error) {
	if value == "" {
		return nil, nil
	}
	type owner struct {
		NodeID string `json:"nodeID"`
	}
	var v struct {
		owner
		Locks *[]owner `json:"locks"`
	}
	if err := json.Unmarshal([]byte(value), &v); err != nil {
		return nil, fmt.Errorf("Kured's lock %q: %w", value, err)
	}
	var nodes []string
	if v.Locks == nil {
		if v.NodeID != "" {
			nodes = append(nodes, v.NodeID)
		}
		return nodes, nil
	}
	for _, o := range *v.Locks {
		nodes = append(nodes, o.NodeID)
	}
	return nodes, nil
}
