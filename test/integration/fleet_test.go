package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kustodian/kustodian/internal/fleet"
	"github.com/kustodian/kustodian/internal/rollout"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// fleetCluster is one cluster of the test's fleet: its context in the
// merged kubeconfig, its Env (the test's namespace there) and how to stop
// and start it.
type fleetCluster struct {
	context string
	env     *cluster.Env
	dyn     dynamic.Interface
	opts    *cluster.Options // nil: the shared cluster, never stopped
}

// fleetOf makes a fleet of three control planes: the shared one (context
// one, ring canary) and two of the test's own (two and three, ring
// prod), each with two kwok nodes whose agents run rollouts signed by
// key, and one kubeconfig naming the three.
func fleetOf(t *testing.T, key nodecreds.RolloutKey) (map[string]*fleetCluster, string) {
	shared := cluster.New(t)
	clusters := map[string]*fleetCluster{"one": {context: "one", env: shared}}
	// One after the other: kwokctl makes each cluster's certificates in
	// a shared directory, and two made at once got each other's CA.
	for _, name := range []string{"two", "three"} {
		opts := &cluster.Options{Name: fmt.Sprintf("fleet-%s-%d", name, os.Getpid()), Log: testWriter{t}}
		t.Cleanup(func() {
			if err := cluster.Down(context.Background(), *opts); err != nil {
				t.Error(err)
			}
		})
		c, err := cluster.Up(t.Context(), *opts)
		if err != nil {
			t.Fatal(err)
		}
		e := &cluster.Env{T: t, ID: shared.ID, Namespace: shared.Namespace, Client: c.Client, Config: c.Config, Kubeconfig: c.Kubeconfig, Ctx: t.Context()}
		clusters[name] = &fleetCluster{context: name, env: e, opts: opts}
	}
	merged := clientcmdapi.NewConfig()
	for name, fc := range clusters {
		if fc.opts != nil {
			if _, err := fc.env.Client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fc.env.Namespace}}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		var nodes []string
		for i := range 2 {
			n := fmt.Sprintf("%s-%s-%d", shared.ID, name, i)
			if err := cluster.CreateNode(t.Context(), fc.env.Client, n, map[string]string{cluster.LabelTestEnv: shared.ID}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = fc.env.Client.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
			})
			nodes = append(nodes, n)
		}
		nodecreds.Install(fc.env, fc.env.Namespace)
		rolloutAgents(t, fc.env, nodes, key)
		fc.dyn = dynamicClient(t, fc.env)
		cfg, err := clientcmd.LoadFromFile(fc.env.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		ctx := cfg.Contexts[cfg.CurrentContext]
		merged.Clusters[name] = cfg.Clusters[ctx.Cluster]
		merged.AuthInfos[name] = cfg.AuthInfos[ctx.AuthInfo]
		merged.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	}
	kubeconfig := filepath.Join(t.TempDir(), "fleet.kubeconfig")
	if err := clientcmd.WriteToFile(*merged, kubeconfig); err != nil {
		t.Fatal(err)
	}
	return clusters, kubeconfig
}

// fleetRolloutIn reads rollout name in a cluster of the fleet (nil: not
// there); any other error fails the test.
func fleetRolloutIn(t *testing.T, fc *fleetCluster, name string) *rollout.MaintenanceRollout {
	t.Helper()
	u, err := fc.dyn.Resource(rollout.GVR).Namespace(fc.env.Namespace).Get(t.Context(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatalf("cluster %s: %v", fc.context, err)
	}
	r, err := rollout.FromUnstructured(u)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// lastFinished is when the last node of a rollout finished, and whether
// every entry succeeded; read by the test itself from the entries.
func lastFinished(r *rollout.MaintenanceRollout) (time.Time, bool) {
	var last time.Time
	ok := len(r.Status.Nodes) > 0
	for _, e := range r.Status.Nodes {
		ok = ok && e.State == rollout.Succeeded
		if e.Finished != nil && e.Finished.After(last) {
			last = e.Finished.Time
		}
	}
	return last, ok
}

// fleetCtl runs kustodian-ctl over the fleet's kubeconfig.
func fleetCtl(t *testing.T, clusters map[string]*fleetCluster, kubeconfig string) nodecreds.Ctl {
	c := nodecreds.CtlFor(clusters["one"].env)
	c.Kubeconfig = kubeconfig
	return c
}

// exitCode is the exit code of a command's error (0: none).
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// A fleet rollout goes ring by ring: the canary ring's cluster until its
// rollout is Complete and its soak has passed, then the prod ring's two
// clusters at once; a cluster that cannot be read is waited for and said,
// the others go on; a failing canary halts the prod ring; a run that was
// killed goes on when run again.
func TestAFleetRolloutGoesRingByRing(t *testing.T) {
	key := nodecreds.NewRolloutKey(t)
	clusters, kubeconfig := fleetOf(t, key)
	ctl := fleetCtl(t, clusters, kubeconfig)
	const soak = 4 * time.Second
	fleetFile := filepath.Join(t.TempDir(), "europe.yaml")
	if err := os.WriteFile(fleetFile, []byte(fmt.Sprintf(`apiVersion: kustodian.io/v1alpha1
kind: Fleet
rings:
- {name: canary, contexts: [one], soak: %s}
- {name: prod, contexts: [two, three], soak: 0s}
`, soak)), 0o600); err != nil {
		t.Fatal(err)
	}
	ok, fails := writeScript(t, "true\n"), writeScript(t, "echo broken >&2; exit 1\n")
	create := func(ctx context.Context, name string, args ...string) *exec.Cmd {
		return ctl.Command(ctx, append([]string{"rollout", "create", name, "--fleet", fleetFile, "--stage", "all", "--wait", "--timeout", "3m"}, args...)...)
	}

	// Two rings, every cluster reachable.
	out, err := create(t.Context(), "patch", "--script", ok, "--key", key.Private).CombinedOutput()
	if err != nil {
		t.Fatalf("fleet rollout: %v\n%s", err, out)
	}
	t.Logf("fleet rollout patch:\n%s", out)
	canary := fleetRolloutIn(t, clusters["one"], "patch")
	done, succeeded := lastFinished(canary)
	if !succeeded {
		t.Fatalf("canary: %+v", canary.Status.Nodes)
	}
	for _, name := range []string{"one", "two", "three"} {
		r := fleetRolloutIn(t, clusters[name], "patch")
		if r == nil {
			t.Fatalf("cluster %s has no rollout patch after the fleet rollout ended", name)
		}
		if _, ok := lastFinished(r); !ok {
			t.Errorf("cluster %s: not every node succeeded: %+v", name, r.Status.Nodes)
		}
		ring := map[string]string{"one": "canary", "two": "prod", "three": "prod"}[name]
		if a := r.Annotations; a[fleet.AnnotationFleet] != "europe" || a[fleet.AnnotationRing] != ring {
			t.Errorf("cluster %s: annotations %v, want fleet europe, ring %s", name, a, ring)
		}
		// Times are whole seconds: a second is given for the rounding.
		if name != "one" && r.CreationTimestamp.Time.Before(done.Add(soak-time.Second)) {
			t.Errorf("cluster %s got the rollout at %s, before the canary's last node finished (%s) and its soak of %s passed",
				name, r.CreationTimestamp.UTC().Format(time.RFC3339), done.UTC().Format(time.RFC3339), soak)
		}
		if name != "one" {
			t.Logf("cluster %s got the rollout %s after the canary's last node finished (soak %s)", name, r.CreationTimestamp.Sub(done), soak)
		}
	}
	if !strings.Contains(string(out), "fleet: complete") {
		t.Errorf("the fleet rollout's output does not say it is complete:\n%s", out)
	}
	st, err := ctl.Run(t.Context(), "rollout", "status", "patch", "--fleet", fleetFile)
	t.Logf("rollout status patch --fleet:\n%s", st)
	if err != nil || !strings.Contains(st, "fleet europe: complete") || strings.Count(st, "2/2 succeeded") != 3 {
		t.Errorf("rollout status --fleet: %v\n%s", err, st)
	}

	// Cluster three is down when the prod ring is due: the rollout waits
	// for it and says so, cluster two goes on, and three gets it when it
	// is back.
	three := clusters["three"]
	if err := cluster.Stop(t.Context(), *three.opts); err != nil {
		t.Fatal(err)
	}
	st, err = ctl.Run(t.Context(), "status", "--fleet", fleetFile)
	t.Logf("status --fleet, cluster three down:\n%s", st)
	if err != nil || !strings.Contains(st, "three") || !strings.Contains(st, "unreachable") {
		t.Errorf("status --fleet with cluster three down: %v\n%s", err, st)
	}
	// The other readers say it too, and go on with the others.
	fleetView := &syncWriter{}
	watch := ctl.Command(t.Context(), "status", "--fleet", fleetFile, "--watch")
	watch.Stdout, watch.Stderr = fleetView, fleetView
	if err := watch.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = watch.Process.Kill(); _ = watch.Wait() })
	hist, err := ctl.Run(t.Context(), "history", "--fleet", fleetFile, "-o", "json")
	if err != nil || !strings.Contains(hist, `"kind": "MaintenanceHistoryList"`) || !strings.Contains(hist, `"cluster": "three"`) ||
		!strings.Contains(hist, "connection refused") || strings.Count(hist, `"kind": "MaintenanceHistory"`) != 2 {
		t.Errorf("history --fleet -o json with cluster three down: %v\n%s", err, hist)
	}
	for _, args := range [][]string{{"queue"}, {"plan", "-l", cluster.LabelTestEnv + "=" + clusters["one"].env.ID}} {
		got, err := ctl.Run(t.Context(), append(args, "--fleet", fleetFile)...)
		if err != nil || !strings.Contains(got, "cluster three: unreachable") {
			t.Errorf("%s --fleet with cluster three down: %v\n%s", args[0], err, got)
		}
		if args[0] == "plan" && (!strings.Contains(got, "CLUSTER") || !strings.Contains(got, clusters["two"].env.ID+"-two-0")) {
			t.Errorf("plan --fleet: no row of cluster two:\n%s", got)
		}
		t.Logf("%s --fleet, cluster three down:\n%s", args[0], got)
	}
	clusters["one"].env.Eventually("the fleet view to show a line per cluster", cluster.DefaultTimeout, func(context.Context) error {
		v := fleetView.String()
		for _, want := range []string{"  one  0/0 done", "  two  0/0 done", "  three  unreachable"} {
			if !strings.Contains(v, want) {
				return fmt.Errorf("no %q in:\n%s", want, v)
			}
		}
		return nil
	})
	// The dashboard of the fleet, in a browser: a section per cluster,
	// three's saying it cannot be read.
	dashboard := dashboardOf(t, ctl, "--fleet", fleetFile)
	b := newBrowser(t)
	clusters["one"].env.Eventually("the fleet's dashboard to show three sections, three unreachable", cluster.DefaultTimeout, func(context.Context) error {
		dom := b.dom(dashboard)
		for _, want := range []string{`<section data-cluster="one">`, `<section data-cluster="two">`, `<section data-cluster="three">`, "unreachable"} {
			if !strings.Contains(dom, want) {
				return fmt.Errorf("no %q in the page", want)
			}
		}
		return nil
	})
	waited := &syncWriter{}
	run := create(t.Context(), "kernel", "--script", ok, "--key", key.Private)
	run.Stdout, run.Stderr = waited, waited
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- run.Wait() }()
	clusters["one"].env.Eventually("the fleet rollout to wait for cluster three and submit to two", 2*cluster.DefaultTimeout, func(context.Context) error {
		if !strings.Contains(waited.String(), "cluster three unreachable") {
			return fmt.Errorf("output so far:\n%s", waited.String())
		}
		if fleetRolloutIn(t, clusters["two"], "kernel") == nil {
			return errors.New("cluster two has no rollout kernel yet")
		}
		return nil
	})
	if _, err := cluster.Start(t.Context(), *three.opts); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("fleet rollout kernel: %v\n%s", err, waited.String())
		}
	case <-time.After(3 * time.Minute):
		t.Fatalf("the fleet rollout did not end within 3 minutes of cluster three's return:\n%s", waited.String())
	}
	t.Logf("fleet rollout kernel, cluster three down for a while:\n%s", waited.String())
	clusters["one"].env.Eventually("the fleet view to see cluster three back", cluster.DefaultTimeout, func(context.Context) error {
		if v := fleetView.String(); !strings.Contains(v, "  three  0/") {
			return fmt.Errorf("cluster three not back in:\n%s", v)
		}
		return nil
	})
	t.Logf("status --fleet --watch:\n%s", fleetView.String())
	clusters["one"].env.Eventually("the fleet's dashboard to show cluster three again", 2*cluster.DefaultTimeout, func(context.Context) error {
		if dom := b.dom(dashboard); count(dom, `(?s)<section data-cluster="three">.*?<svg`) != 1 {
			return errors.New("no chart of cluster three")
		}
		return nil
	})
	if r := fleetRolloutIn(t, three, "kernel"); r == nil {
		t.Fatal("cluster three has no rollout kernel")
	} else if _, ok := lastFinished(r); !ok {
		t.Errorf("cluster three: %+v", r.Status.Nodes)
	}

	// Killed once the canary has it, then run again (without the script:
	// the clusters have it): it goes on, and the canary's rollout is the
	// one it had.
	killed := create(t.Context(), "again", "--script", ok, "--key", key.Private)
	killed.Stdout = &syncWriter{}
	if err := killed.Start(); err != nil {
		t.Fatal(err)
	}
	clusters["one"].env.Eventually("the canary to get rollout again", cluster.DefaultTimeout, func(context.Context) error {
		if fleetRolloutIn(t, clusters["one"], "again") == nil {
			return errors.New("not yet")
		}
		return nil
	})
	if err := killed.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = killed.Wait()
	uid := fleetRolloutIn(t, clusters["one"], "again").UID
	out, err = create(t.Context(), "again").CombinedOutput()
	if err != nil {
		t.Fatalf("fleet rollout run again: %v\n%s", err, out)
	}
	if r := fleetRolloutIn(t, clusters["one"], "again"); r.UID != uid {
		t.Error("the canary's rollout was made again")
	}
	for _, name := range []string{"two", "three"} {
		if r := fleetRolloutIn(t, clusters[name], "again"); r == nil {
			t.Errorf("cluster %s has no rollout again after the run that went on", name)
		}
	}

	// Paused and resumed across the fleet: every copy, each said.
	for _, verb := range []string{"pause", "resume"} {
		out, err := ctl.Run(t.Context(), "rollout", verb, "again", "--fleet", fleetFile)
		if err != nil || strings.Count(out, "maintenancerollout.kustodian.io/again "+verb[:len(verb)-1]) != 3 {
			t.Errorf("rollout %s --fleet: %v\n%s", verb, err, out)
		}
		for _, name := range []string{"one", "two", "three"} {
			if r := fleetRolloutIn(t, clusters[name], "again"); r.Spec.Paused != (verb == "pause") {
				t.Errorf("cluster %s: spec.paused %v after rollout %s --fleet", name, r.Spec.Paused, verb)
			}
		}
	}

	// Last, as it leaves the canary's node held: a failing canary halts
	// the prod ring: exit 4, nothing in two or three.
	out, err = create(t.Context(), "broken", "--script", fails, "--key", key.Private).CombinedOutput()
	if exitCode(err) != 4 || !strings.Contains(string(out), "halted at ring canary") {
		t.Errorf("fleet rollout of a failing script: exit %d, want 4 and halted:\n%s", exitCode(err), out)
	}
	for _, name := range []string{"two", "three"} {
		if fleetRolloutIn(t, clusters[name], "broken") != nil {
			t.Errorf("cluster %s got the rollout the canary failed", name)
		}
	}
}

// syncWriter lets a command's stdout and stderr and the test share a
// buffer.
type syncWriter struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(b)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// dashboardOf starts kustodian-ctl dashboard with args on a free loopback
// port, and returns its page's URL once it serves.
func dashboardOf(t *testing.T, ctl nodecreds.Ctl, args ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	address := ln.Addr().String()
	ln.Close()
	dash := ctl.Command(t.Context(), append([]string{"dashboard", "--address", address}, args...)...)
	out := &syncWriter{}
	dash.Stdout, dash.Stderr = out, out
	if err := dash.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dash.Process.Kill(); _ = dash.Wait() })
	url := "http://" + address + "/"
	deadline := time.Now().Add(cluster.DefaultTimeout)
	for !strings.Contains(out.String(), url) {
		if time.Now().After(deadline) {
			t.Fatalf("the dashboard did not serve within %s:\n%s", cluster.DefaultTimeout, out.String())
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
	return url
}
