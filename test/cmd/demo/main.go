// Command demo is `make demo`: a local control plane with 5 kwok nodes and
// workloads guarded by PodDisruptionBudgets, one Kustodian agent per node,
// and a maintenance requested on every node at once. It prints the live
// timeline, then a summary, and stops what it started on exit or Ctrl-C.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/policy"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
	"github.com/kustodian/kustodian/test/timeline"
)

type options struct {
	name, namespace, kustodian, ctl, script, workdir string
	nodes, workMS, failPercent                       int
	keep, notify, rollout, kured                     bool
	kuredBinary                                      string
	zones                                            int
}

func main() {
	var o options
	flag.StringVar(&o.name, "name", "kustodian", "cluster name")
	flag.IntVar(&o.nodes, "nodes", 5, "number of nodes")
	flag.StringVar(&o.namespace, "namespace", "kustodian", "Kustodian's namespace")
	flag.StringVar(&o.kustodian, "kustodian", "bin/kustodian", "the kustodian binary")
	flag.StringVar(&o.ctl, "kustodian-ctl", "bin/kustodian-ctl", "the kustodian-ctl binary, whose status --watch runs beside the timeline")
	flag.StringVar(&o.script, "script", "examples/flaky-maintenance.sh", "the maintenance script run on every node")
	flag.IntVar(&o.workMS, "work-ms", 1500, "the most each script works, in ms")
	flag.IntVar(&o.failPercent, "fail-percent", 0, "the chance, in percent, that a script fails")
	flag.StringVar(&o.workdir, "workdir", filepath.Join(os.TempDir(), "kustodian-demo"), "directory of the nodes' host files and logs")
	flag.BoolVar(&o.keep, "keep-cluster", false, "leave the cluster running at the end")
	flag.IntVar(&o.zones, "zones", 0, "spread the nodes over this many zones and apply a MaintenancePolicy with groupBy zone, one node per zone at a time (0: no policy, one node at a time)")
	flag.BoolVar(&o.notify, "notify", false, "send the agents' notifications (notify.urls) to a local webhook receiver and print what it gets")
	flag.BoolVar(&o.rollout, "rollout", true, "after the maintenance, roll a signed script across the nodes in two stages, with a node that joins midway")
	flag.BoolVar(&o.kured, "kured", false, "run Kured's own binary on every node beside the agents (as root), and end with two nodes that Kured reboots while Kustodian maintains a third, each waiting for the other")
	flag.StringVar(&o.kuredBinary, "kured-binary", "", "Kured's binary, for --kured (make demo passes the one make kured builds)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o)
	stop()
	if err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "demo: "+err.Error())
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	for _, f := range []string{o.kustodian, o.ctl, o.script} {
		if _, err := os.Stat(f); err != nil {
			return fmt.Errorf("%s: %w (run make demo from the repository's root)", f, err)
		}
	}
	copts := cluster.Options{Name: o.name, Nodes: o.nodes, Log: os.Stderr}
	started := !cluster.Running(ctx, copts)
	c, err := cluster.Up(ctx, copts)
	if err != nil {
		return err
	}
	if started && !o.keep {
		defer func() {
			fmt.Println("stopping the cluster")
			_ = cluster.Down(context.Background(), copts)
		}()
	}
	nodes := make([]string, o.nodes)
	for i := range nodes {
		nodes[i] = cluster.NodeName(i)
	}
	if err := prepare(ctx, c.Client, o.namespace, nodes); err != nil {
		return err
	}
	ctl := nodecreds.Ctl{Binary: o.ctl, Kubeconfig: c.Kubeconfig, Namespace: o.namespace}
	if err := ctl.Install(ctx, "kube-system"); err != nil {
		return err
	}
	fmt.Printf("kustodian-ctl install: namespace %s, RBAC and admission policies; each agent runs with its node's own kubeconfig\n", o.namespace)
	// The key an admin signs rollouts with, which every host trusts.
	if err := os.MkdirAll(o.workdir, 0o755); err != nil {
		return err
	}
	key, err := nodecreds.WriteRolloutKey(o.workdir)
	if err != nil {
		return err
	}
	slots := 1
	if o.zones > 0 {
		if err := zonePolicy(ctx, c, o.namespace, nodes, o.zones); err != nil {
			return err
		}
		slots = o.zones
		fmt.Printf("MaintenancePolicy zones: the nodes spread over %d zones (topology.kubernetes.io/zone), one node per zone at a time\n", o.zones)
	} else if err := deletePolicy(ctx, c, o.namespace); err != nil {
		return err
	}
	fmt.Println("workloads: shop/web 10 pods (PDB minAvailable 8), shop/api 5 (PDB maxUnavailable 1), shop/db 3 (PDB minAvailable 2)")
	if err := workloads(ctx, c.Client); err != nil {
		return err
	}

	// What a rollout of every node would do, before anything starts.
	out, err := ctl.Run(ctx, append([]string{"plan"}, nodes...)...)
	if err != nil {
		return fmt.Errorf("kustodian-ctl plan: %w\n%s", err, out)
	}
	fmt.Printf("\nkustodian-ctl plan %s ... (a dry run: the order, each node's predicted start and end from its history, 10 minutes where it has none, and the pods a PodDisruptionBudget would keep now):\n%s", nodes[0], out)

	start := time.Now()
	tl, err := timeline.Record(ctx, c.Client, o.namespace, func(t timeline.Transition) {
		fmt.Println(timeline.Line(t, start))
	})
	if err != nil {
		return err
	}
	fmt.Printf("\n%d agents, a maintenance requested on every node at once (%s, up to %d ms of work each)\n", len(nodes), filepath.Base(o.script), o.workMS)
	fmt.Printf("lines starting with \"ctl |\" are kustodian-ctl status --watch, run beside the timeline\n\n")
	fmt.Printf("%9s  %-22s %-14s %s\n", "time", "node", "state", "message")
	stopWatch, err := prefixed(exec.CommandContext(ctx, o.ctl, "--kubeconfig", c.Kubeconfig, "-n", o.namespace, "status", "--watch"), "ctl | ")
	if err != nil {
		return err
	}
	defer stopWatch()

	var notifyURL string
	if o.notify {
		if notifyURL, err = receiveNotifications(ctx); err != nil {
			return err
		}
		fmt.Printf("notifications: every agent sends to %s; lines starting with \"notify |\" are what the local receiver got\n", notifyURL)
	}

	var k *kureds
	if o.kured {
		if k, err = startKureds(ctx, o, c, nodes); err != nil {
			return err
		}
		defer k.stop()
	}

	var procs []*exec.Cmd
	defer func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range procs {
			_ = p.Wait()
		}
	}()
	for i, n := range nodes {
		p, err := startAgent(ctx, o, ctl, n, i, notifyURL, key)
		if err != nil {
			return err
		}
		procs = append(procs, p)
	}

	type result struct {
		node string
		err  error
	}
	results := make(chan result, len(nodes))
	var wg sync.WaitGroup
	for _, n := range nodes {
		p, err := startScript(o, n)
		if err != nil {
			return err
		}
		procs = append(procs, p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			results <- result{n, p.Wait()}
		}()
	}

	failed := ""
	for range nodes {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case r := <-results:
			if r.err != nil && failed == "" {
				failed = r.node
				fmt.Printf("\nthe script on %s FAILED: it keeps its request, so %s stays cordoned and keeps the lock, and the rollout stops.\n", r.node, r.node)
				fmt.Printf("to go on, remove %s; Ctrl-C ends the demo\n\n", filepath.Join(o.workdir, r.node, "maintenance-required"))
			}
		}
	}
	if err := cluster.Eventually(ctx, time.Minute, func(context.Context) error { return tl.AllIdle(nodes) }); err != nil {
		return fmt.Errorf("waiting for every node to be Idle: %w", err)
	}
	printSummary(tl, start)
	if err := tl.CheckExclusive(slots); err != nil {
		return fmt.Errorf("the rollout broke its promise: %w", err)
	}
	out, err = ctl.Run(ctx, "history")
	if err != nil {
		return fmt.Errorf("kustodian-ctl history: %w\n%s", err, out)
	}
	fmt.Printf("\nkustodian-ctl history (each node keeps its last maintenances on its Node):\n%s", out)
	if err := drawn(ctx, o, ctl, "history.svg", "history", "-o", "svg"); err != nil {
		return err
	}
	if o.rollout {
		if err := showRollout(ctx, o, c, ctl, key, nodes, &procs, notifyURL); err != nil {
			return err
		}
		if err := tl.CheckExclusive(slots); err != nil {
			return fmt.Errorf("the rollout broke its promise: %w", err)
		}
	}
	if k != nil {
		return showKured(ctx, o, k, tl, nodes, &procs)
	}
	return nil
}

// startScript starts the maintenance script of node, which asks for the
// maintenance (its request file) and does its work once the node is
// drained; its output goes to the node's script.log.
func startScript(o options, node string) (*exec.Cmd, error) {
	dir := filepath.Join(o.workdir, node)
	env := []string{
		"REQUEST=" + filepath.Join(dir, "maintenance-required"),
		"IN_PROGRESS=" + filepath.Join(dir, "maintenance-in-progress"),
		fmt.Sprintf("WORK_MS=%d", o.workMS), fmt.Sprintf("FAIL_PERCENT=%d", o.failPercent),
		"REASON=demo patch of " + node,
	}
	return startLogged(filepath.Join(dir, "script.log"), env, "bash", o.script)
}

// zonePolicy labels the nodes with zones and applies a policy that groups
// by zone.
func zonePolicy(ctx context.Context, c *cluster.Cluster, ns string, nodes []string, zones int) error {
	for i, n := range nodes {
		patch := fmt.Sprintf(`{"metadata":{"labels":{"topology.kubernetes.io/zone":"zone-%c"}}}`, 'a'+i%zones)
		if _, err := c.Client.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return err
		}
	}
	return nodecreds.ApplyPolicy(ctx, c.Config, ns, "zones", map[string]any{"groupBy": "topology.kubernetes.io/zone", "concurrency": int64(1)})
}

// deletePolicy removes the zones policy a previous demo left.
func deletePolicy(ctx context.Context, c *cluster.Cluster, ns string) error {
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	err = dyn.Resource(policy.GVR).Namespace(ns).Delete(ctx, "zones", metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

func startLogged(logPath string, env []string, name string, args ...string) (*exec.Cmd, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	err = cmd.Start()
	f.Close() // the child has its own copy
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	return cmd, nil
}

func printSummary(tl *timeline.Timeline, start time.Time) {
	s := tl.Summarize()
	fmt.Printf("\nsummary: %d nodes, makespan %.2fs\n", len(s.Nodes), s.Makespan.Seconds())
	fmt.Printf("  %-22s %10s %10s %12s\n", "node (grant order)", "waited", "drain", "maintenance")
	for _, n := range s.Nodes {
		fmt.Printf("  %-22s %9.2fs %9.2fs %11.2fs\n", n.Node, n.Granted.Sub(n.Requested).Seconds(), n.Drain.Seconds(), n.Maintenance.Seconds())
	}
	fmt.Print("  handoff gaps (script done on one node to the next node's grant):")
	for _, h := range s.Handoffs {
		fmt.Printf(" %dms", h.Milliseconds())
	}
	fmt.Println()
}

// prepare makes the namespace and starts from a clean slate: no record, no
// lock, not paused, every demo node uncordoned.
func prepare(ctx context.Context, client kubernetes.Interface, ns string, nodes []string) error {
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	sel := metav1.ListOptions{LabelSelector: lock.LabelManagedBy + "=" + lock.ManagedBy}
	if err := client.CoordinationV1().Leases(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		return err
	}
	if err := client.CoreV1().ConfigMaps(ns).Delete(ctx, "control", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	for _, n := range nodes {
		patch := []byte(`{"spec":{"unschedulable":false},"metadata":{"labels":{"kustodian.io/state":null},"annotations":{"kustodian.io/cordoned":null}}}`)
		if _, err := client.CoreV1().Nodes().Patch(ctx, n, "application/strategic-merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// workloads creates the shop's Deployments and PDBs (once) and waits for
// their pods to run.
func workloads(ctx context.Context, client kubernetes.Interface) error {
	const ns = "shop"
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for _, w := range []struct {
		name     string
		replicas int32
		pdb      policyv1.PodDisruptionBudgetSpec
	}{
		{"web", 10, policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr(intstr.FromInt32(8))}},
		{"api", 5, policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr(intstr.FromInt32(1))}},
		{"db", 3, policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr(intstr.FromInt32(2))}},
	} {
		labels := map[string]string{"app": w.name}
		d := &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Replicas: &w.replicas,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						NodeSelector: map[string]string{"type": "kwok"},
						Containers:   []corev1.Container{{Name: w.name, Image: "registry.k8s.io/pause:3.10"}},
					},
				},
			},
		}
		if _, err := client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
		pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: w.name, Namespace: ns}, Spec: w.pdb}
		pdb.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
		if _, err := client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return cluster.Eventually(ctx, 2*time.Minute, func(ctx context.Context) error {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := 0
		for i := range pods.Items {
			if cluster.PodReady(&pods.Items[i]) && pods.Items[i].DeletionTimestamp == nil {
				ready++
			}
		}
		if ready < 18 {
			return fmt.Errorf("%d of 18 pods running", ready)
		}
		return nil
	})
}

func ptr[T any](v T) *T { return &v }

// receiveNotifications starts a local webhook receiver standing in for
// Slack or Teams, printing each message it gets, and returns the shoutrrr
// URL the agents send to.
func receiveNotifications(ctx context.Context) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var payload struct {
			Message string `json:"message"`
		}
		if err := json.NewDecoder(r.Body).Decode(&payload); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		fmt.Println("notify | " + payload.Message)
	})}
	go func() { _ = srv.Serve(ln) }()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	return "generic://" + ln.Addr().String() + "/demo?disabletls=yes&template=json", nil
}
