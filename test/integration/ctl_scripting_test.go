package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/test/cluster"
)

// restrictedKubeconfig writes a kubeconfig for a ServiceAccount without any
// RBAC permission.
func restrictedKubeconfig(t *testing.T, e *cluster.Env) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody", Namespace: e.Namespace}}
	if _, err := e.Client.CoreV1().ServiceAccounts(e.Namespace).Create(e.Ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tok, err := e.Client.CoreV1().ServiceAccounts(e.Namespace).CreateToken(e.Ctx, "nobody", &authv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientcmd.LoadFromFile(e.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cluster := admin.Clusters[admin.Contexts[admin.CurrentContext].Cluster]
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = cluster
	cfg.AuthInfos["nobody"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "nobody"}
	cfg.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// What a script and a kubectl user do with kustodian-ctl against a real API
// server: kubectl's own plugin completion offers the nodes; a server dry
// run of install and of pause is checked and kept by nothing; wait follows
// a node's maintenance to its end, and times out with exit 3.
func TestCtlScripting(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(2)

	// kubectl finds the plugin and its completion on the PATH.
	k8sBin, err := cluster.BinDir(e.Ctx)
	if err != nil {
		t.Fatal(err)
	}
	pathDir := t.TempDir()
	if err := os.Symlink(ctlBinary(t), filepath.Join(pathDir, "kubectl-kustodian")); err != nil {
		t.Fatal(err)
	}
	script, err := os.ReadFile(repoFile(t, "packaging/kubectl_complete-kustodian"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pathDir, "kubectl_complete-kustodian"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	complete := exec.CommandContext(e.Ctx, filepath.Join(k8sBin, "kubectl"), "__complete", "kustodian", "--kubeconfig", e.Kubeconfig, "status", "")
	complete.Env = append(os.Environ(), "PATH="+pathDir+":"+os.Getenv("PATH"))
	out, err := complete.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl __complete kustodian status: %v\n%s", err, out)
	}
	for _, n := range nodes {
		if !regexp.MustCompile(`(?m)^` + n + `$`).Match(out) {
			t.Errorf("kubectl's completion of kubectl kustodian status lacks node %s:\n%s", n, out)
		}
	}

	// A server dry run: the API server checks each write and keeps none.
	// Before the install (the test's namespace exists, nothing else):
	vap := "kustodian-agent-" + e.Namespace + "-events"
	// (with Kured's namespace as the test's install has it)
	dry := mustCtl(t, e, "install", "--kured-namespace", e.Namespace, "--dry-run=server")
	if !strings.Contains(dry, "validatingadmissionpolicies "+vap+" created (server dry run)") || !strings.Contains(dry, "nothing was changed (server dry run)") {
		t.Errorf("install --dry-run=server before the install:\n%s", dry)
	}
	if _, err := e.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(e.Ctx, vap, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after install --dry-run=server, the policy %s: %v, want not found", vap, err)
	}
	a := newAgent(t, e, nodes[0]) // installs Kustodian, mints the node's kubeconfig
	dry = mustCtl(t, e, "install", "--kured-namespace", e.Namespace, "--dry-run=server")
	if !strings.Contains(dry, "validatingadmissionpolicies "+vap+" unchanged (server dry run)") ||
		strings.Contains(dry, " created (server dry run)") || strings.Contains(dry, " configured (server dry run)") {
		t.Errorf("install --dry-run=server on an install that is up to date:\n%s", dry)
	}
	mustCtl(t, e, "pause", "--reason", "dry", "--dry-run=server")
	if s := mustCtl(t, e, "status", "-o", "jsonpath={.paused}"); s != "false" {
		t.Errorf("paused %q after pause --dry-run=server", s)
	}

	// wait --for=done follows a maintenance, started before it was requested.
	wait := exec.CommandContext(e.Ctx, ctlBinary(t), "--kubeconfig", e.Kubeconfig, "-n", e.Namespace,
		"wait", nodes[0], "--for=done", "--timeout", "2m")
	var waitOut strings.Builder
	wait.Stdout, wait.Stderr = &waitOut, &waitOut
	if err := wait.Start(); err != nil {
		t.Fatal(err)
	}
	a.request("patch")
	a.start()
	a.waitInProgress(cluster.DefaultTimeout)
	a.completes()
	if err := wait.Wait(); err != nil {
		t.Errorf("wait --for=done: %v\n%s", err, waitOut.String())
	}
	for _, want := range []string{nodes[0] + ": Idle", nodes[0] + ": done"} {
		if !strings.Contains(waitOut.String(), want) {
			t.Errorf("wait --for=done output lacks %q:\n%s", want, waitOut.String())
		}
	}
	// Nothing is requested on the other node: --for=maintenance times out.
	_, err = ctl(t, e, "wait", nodes[1], "--for=maintenance", "--timeout", "3s")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Errorf("wait --for=maintenance on an idle node: %v, want exit 3", err)
	}
}

// kustodian-ctl queue shows the order the agents grant in: a node held by
// an admin (its own gate closed) is passed by the agents, and has no
// position in the CLI's queue either. The agents' queue is the summary the
// last holder wrote as it handed the lock on, less the nodes that hold a
// lock since: read from the queue Lease's annotation and the locks' holders
// as the contract gives them, not through the code that wrote them.
func TestCtlQueueAgreesWithTheAgents(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodes := e.Nodes(4)
	agents := make([]*agentProc, len(nodes))
	for i, n := range nodes {
		agents[i] = newAgent(t, e, n)
	}
	agents[0].request("kernel")
	agents[0].start()
	agents[0].waitInProgress(cluster.DefaultTimeout)
	for _, a := range agents[1:] {
		a.request("kernel")
		a.start()
		waitRecord(e, a.node, "Waiting", inStateSaying(lock.Waiting, "position"))
	}
	mustCtl(t, e, "pause", nodes[1], "--reason", "disk swap")
	waitRecord(e, nodes[1], "blocked by its hold", func(r *lock.Record) error {
		if r == nil || !strings.Contains(r.Blocked, "disk swap") {
			return fmt.Errorf("record %+v", r)
		}
		return nil
	})
	// The holder hands the lock on: it writes the queue as it stands.
	agents[0].completes()

	agentsQueue := func(ctx context.Context) ([]string, error) {
		leases, err := e.Client.CoordinationV1().Leases(e.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		holding := map[string]bool{}
		var summary string
		for _, l := range leases.Items {
			switch {
			case strings.HasPrefix(l.Name, "lock-") && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "":
				holding[*l.Spec.HolderIdentity] = true
			case l.Name == "queue-default":
				summary = l.Annotations["kustodian.io/queue"]
			}
		}
		var s struct {
			Nodes []string `json:"nodes"`
		}
		if err := json.Unmarshal([]byte(summary), &s); err != nil {
			return nil, fmt.Errorf("queue-default's kustodian.io/queue %q: %w", summary, err)
		}
		var q []string
		for _, n := range s.Nodes {
			if !holding[n] {
				q = append(q, n)
			}
		}
		return q, nil
	}
	ctlQueue := func() (positioned []string, heldAt int, err error) {
		var q struct {
			Items []struct {
				Node     string `json:"node"`
				Position int    `json:"position"`
			} `json:"items"`
		}
		out, err := ctl(t, e, "queue", "-o", "json")
		if err != nil {
			return nil, 0, fmt.Errorf("queue -o json: %v\n%s", err, out)
		}
		if err := json.Unmarshal([]byte(out), &q); err != nil {
			return nil, 0, fmt.Errorf("queue -o json: %v\n%s", err, out)
		}
		heldAt = -1
		for _, it := range q.Items {
			if it.Node == nodes[1] {
				heldAt = it.Position
			} else if it.Position != 0 {
				positioned = append(positioned, it.Node)
			}
		}
		return positioned, heldAt, nil
	}
	e.Eventually("kustodian-ctl queue to agree with the agents' queue", cluster.DefaultTimeout, func(ctx context.Context) error {
		theirs, err := agentsQueue(ctx)
		if err != nil {
			return err
		}
		ours, heldAt, err := ctlQueue()
		if err != nil {
			return err
		}
		if slices.Contains(theirs, nodes[1]) {
			return fmt.Errorf("the agents' queue %v names the held node", theirs)
		}
		if heldAt != 0 || !slices.Equal(ours, theirs) {
			return fmt.Errorf("kustodian-ctl queue: %v, the held node at position %d; the agents' queue: %v", ours, heldAt, theirs)
		}
		return nil
	})

	mustCtl(t, e, "resume", nodes[1])
	for _, a := range agents[1:] {
		a.completes()
	}
}
