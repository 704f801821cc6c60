package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/kustodian/kustodian/test/agentproc"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// rolloutName is the demo's MaintenanceRollout.
const rolloutName = "demo-fix"

// startAgent starts node's agent with its own kubeconfig, as on a fleet,
// trusting the demo's rollout key. i numbers its metrics port.
func startAgent(ctx context.Context, o options, ctl nodecreds.Ctl, node string, i int, notifyURL string, key nodecreds.RolloutKey) (*exec.Cmd, error) {
	dir := filepath.Join(o.workdir, node)
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := ctl.NodeKubeconfig(ctx, node, kubeconfig); err != nil {
		return nil, err
	}
	textfile, listen := filepath.Join(dir, "kustodian.prom"), fmt.Sprintf("127.0.0.1:%d", 9842+i)
	extra := []string{"--stay", "--queue-heartbeat", "2s", "--drain-evict-error-retry-delay", "1s",
		"--metrics-textfile", textfile, "--metrics-listen", listen}
	if o.rollout {
		extra = append(extra, "--rollouts-enabled", "--rollouts-trusted-keys", key.Trusted)
	}
	if notifyURL != "" {
		extra = append(extra, "--notify-urls", notifyURL)
	}
	p, err := agentproc.Start(agentproc.Spec{Binary: o.kustodian, Kubeconfig: kubeconfig, Namespace: o.namespace,
		Node: node, Dir: dir, Extra: extra})
	if err != nil {
		return nil, err
	}
	fmt.Printf("metrics of %s: curl -s http://%s/metrics (while its agent runs), and %s (node_exporter's textfile, kept)\n", node, listen, textfile)
	return p, nil
}

// showRollout rolls a signed script across the nodes: one node first, then,
// once it succeeded and soaked, all, with a node created after the canary
// succeeded (its agent started then) taking it too. kustodian-ctl rollout
// status --watch runs beside the timeline (lines "rollout |").
func showRollout(ctx context.Context, o options, c *cluster.Cluster, ctl nodecreds.Ctl, key nodecreds.RolloutKey, nodes []string, procs *[]*exec.Cmd, notifyURL string) error {
	script := filepath.Join(o.workdir, "fix.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho \"patched $(date +%T)\"\nsleep 1\n"), 0o755); err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	// A demo run before left its rollout: this one starts afresh.
	if err := dyn.Resource(rollout.GVR).Namespace(o.namespace).Delete(ctx, rolloutName, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	fmt.Printf("\na signed MaintenanceRollout %s: %s on one node first, then, once it succeeded and 5s passed, on all; every host trusts the key it is signed with (rollouts.trustedKeys)\n", rolloutName, filepath.Base(script))
	fmt.Printf("lines starting with \"rollout |\" are kustodian-ctl rollout status %s --watch\n\n", rolloutName)
	out, err := ctl.Run(ctx, "rollout", "create", rolloutName, "--script", script, "--stage", "1", "--stage", "all",
		"--promotion", "auto", "--soak", "5s", "--reboot", "never", "--key", key.Private)
	if err != nil {
		return fmt.Errorf("kustodian-ctl rollout create: %w\n%s", err, out)
	}
	fmt.Print(out)
	stopWatch, err := prefixed(ctl.Command(ctx, "rollout", "status", rolloutName, "--watch"), "rollout | ")
	if err != nil {
		return err
	}
	defer stopWatch()

	entries := func(ctx context.Context) (*rollout.MaintenanceRollout, error) {
		u, err := dyn.Resource(rollout.GVR).Namespace(o.namespace).Get(ctx, rolloutName, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return rollout.FromUnstructured(u)
	}
	if err := cluster.Eventually(ctx, 2*time.Minute, func(ctx context.Context) error {
		r, err := entries(ctx)
		if err != nil {
			return err
		}
		for _, e := range r.Status.Nodes {
			if e.State == rollout.Succeeded {
				return nil
			}
		}
		return fmt.Errorf("no node has succeeded yet")
	}); err != nil {
		return fmt.Errorf("waiting for the canary: %w", err)
	}

	// A node joins while the rollout is under way: it runs it too.
	joined := cluster.NodeName(len(nodes))
	if err := cluster.CreateNode(ctx, c.Client, joined, nil); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	defer func() { _ = c.Client.CoreV1().Nodes().Delete(context.Background(), joined, metav1.DeleteOptions{}) }()
	fmt.Printf("\nnode %s joins the cluster now, after the canary: its agent starts and it takes the rollout at the stage that reaches it\n", joined)
	p, err := startAgent(ctx, o, ctl, joined, len(nodes), notifyURL, key)
	if err != nil {
		return err
	}
	*procs = append(*procs, p)

	failed := false
	if err := cluster.Eventually(ctx, 3*time.Minute, func(ctx context.Context) error {
		r, err := entries(ctx)
		if err != nil {
			return err
		}
		failed = meta.IsStatusConditionTrue(r.Status.Conditions, rollout.ConditionFailed)
		if failed || meta.IsStatusConditionTrue(r.Status.Conditions, rollout.ConditionComplete) {
			return nil
		}
		b, _ := json.Marshal(r.Status.Counts)
		return fmt.Errorf("not complete: %s", b)
	}); err != nil {
		return fmt.Errorf("waiting for the rollout to complete: %w", err)
	}
	if failed {
		return fmt.Errorf("the rollout %s failed: kustodian-ctl rollout status %s says why", rolloutName, rolloutName)
	}
	out, err = ctl.Run(ctx, "rollout", "status", rolloutName)
	if err != nil {
		return fmt.Errorf("kustodian-ctl rollout status: %w\n%s", err, out)
	}
	fmt.Printf("\nkustodian-ctl rollout status %s (%s took it too):\n%s", rolloutName, joined, out)
	return drawn(ctx, o, ctl, "rollout.svg", "rollout", "report", rolloutName, "-o", "svg")
}

// drawn writes a picture kustodian-ctl draws (args end in -o svg) to name
// in the workdir, and says where.
func drawn(ctx context.Context, o options, ctl nodecreds.Ctl, name string, args ...string) error {
	out, err := ctl.Command(ctx, args...).Output()
	if err != nil {
		return fmt.Errorf("kustodian-ctl %s: %w", strings.Join(args, " "), err)
	}
	path := filepath.Join(o.workdir, name)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return err
	}
	fmt.Printf("\nkustodian-ctl %s > %s: a picture of it (-o html: a page with a table of the nodes)\n", strings.Join(args, " "), path)
	return nil
}

// prefixed starts cmd (a kustodian-ctl --watch) and prints each line of
// its output after prefix; stop ends it.
func prefixed(cmd *exec.Cmd, prefix string) (stop func(), err error) {
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", strings.Join(cmd.Args, " "), err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			fmt.Println(prefix + sc.Text())
		}
	}()
	return func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }, nil
}
