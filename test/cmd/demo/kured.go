package main

// The demo's Kured phase (--kured): Kured's own binary beside the agents,
// as on a cluster moving from Kured: Kured reboots the nodes that need it,
// Kustodian maintains the others, and each waits for the other through
// Kured's lock, so that never two nodes are cordoned at once.

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/kuredproc"
	"github.com/kustodian/kustodian/test/timeline"
)

// kuredNamespace is where the demo's Kured DaemonSet is: the agents'
// default (kured.namespace), as in a cluster that runs Kured's manifests.
const kuredNamespace = "kube-system"

// kureds is Kured on every node: a DaemonSet object standing for Kured's
// (its pods run nowhere; it carries Kured's lock), Kured's ServiceAccount
// with the rights of Kured's manifests, and one Kured process per node, each
// in a PID and mount namespace of its own (test/kuredproc) whose reboot
// command only leaves a mark.
type kureds struct {
	cfg    kuredproc.Config // what every instance shares
	dir    string
	remove func()
	c      *cluster.Cluster
	mu     sync.Mutex
	procs  map[string]*kuredproc.Kured
	starts map[string]int
}

// startKureds starts Kured on every node, at the demo's start: Kured waits
// 30 to 90 s after it starts before it first looks at its lock.
func startKureds(ctx context.Context, o options, c *cluster.Cluster, nodes []string) (*kureds, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("--kured runs each Kured in a PID and mount namespace of its own (unshare), which needs root: run make demo as root")
	}
	if _, err := os.Stat(o.kuredBinary); err != nil {
		return nil, fmt.Errorf("Kured's binary: %w (make demo DEMO_FLAGS=--kured builds it with make kured)", err)
	}
	if err := kuredDaemonSet(ctx, c); err != nil {
		return nil, err
	}
	remove, err := kuredproc.Grant(ctx, c.Client, kuredNamespace, "kured-demo")
	if err != nil {
		return nil, err
	}
	k := &kureds{dir: filepath.Join(o.workdir, "kured"), remove: remove, c: c, procs: map[string]*kuredproc.Kured{}, starts: map[string]int{}}
	defer func() {
		if err != nil {
			k.stop()
		}
	}()
	var token, ca []byte
	if token, err = kuredproc.Token(ctx, c.Client, kuredNamespace); err != nil {
		return nil, err
	}
	if ca = c.Config.CAData; len(ca) == 0 {
		if ca, err = os.ReadFile(c.Config.CAFile); err != nil {
			return nil, err
		}
	}
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		return nil, err
	}
	port, _ := strconv.Atoi(u.Port())
	k.cfg = kuredproc.Config{Binary: o.kuredBinary, DSNamespace: kuredNamespace, APIHost: u.Hostname(), APIPort: port,
		Token: token, CA: ca, Period: 10 * time.Second}
	if err = os.RemoveAll(k.dir); err != nil {
		return nil, err
	}
	for _, n := range nodes {
		if err = k.start(n); err != nil {
			return nil, err
		}
	}
	fmt.Printf("Kured's own binary (%s) on every node (--period 10s, its lock on DaemonSet %s/kured, each in a PID and mount namespace of its own; its reboot command only leaves a mark); each waits 30-90 s before it first looks at its lock, as Kured does\n",
		o.kuredBinary, kuredNamespace)
	return k, nil
}

// kuredDaemonSet creates the DaemonSet standing for Kured's, whose pods run
// nowhere, unless it exists (a cluster kept from an earlier demo).
func kuredDaemonSet(ctx context.Context, c *cluster.Cluster) error {
	ds := cluster.KuredDaemonSet(kuredNamespace)
	_, err := c.Client.AppsV1().DaemonSets(kuredNamespace).Create(ctx, ds, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating DaemonSet %s/kured: %w", kuredNamespace, err)
	}
	return nil
}

// start starts Kured on node, on a host of its own: a new directory each
// time, so a start after a reboot finds no sentinel.
func (k *kureds) start(node string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.starts[node]++
	cfg := k.cfg
	cfg.Node = node
	cfg.Dir = filepath.Join(k.dir, fmt.Sprintf("%s-%d", node, k.starts[node]))
	p, err := kuredproc.Start(cfg)
	if err != nil {
		return err
	}
	k.procs[node] = p
	return nil
}

// proc is node's running Kured.
func (k *kureds) proc(node string) *kuredproc.Kured {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.procs[node]
}

// reboot plays node's reboot for Kured: stopped, started again on a host
// that needs no reboot.
func (k *kureds) reboot(node string) error {
	k.proc(node).Stop()
	return k.start(node)
}

// stop stops every Kured and removes what startKureds made in the cluster.
func (k *kureds) stop() {
	k.mu.Lock()
	for _, p := range k.procs {
		p.Stop()
	}
	k.mu.Unlock()
	k.remove()
	_ = k.c.Client.AppsV1().DaemonSets(kuredNamespace).Delete(context.Background(), "kured", metav1.DeleteOptions{})
	_ = k.c.Client.CoreV1().ServiceAccounts(kuredNamespace).Delete(context.Background(), "kured", metav1.DeleteOptions{})
}

// lockHolders is who holds Kured's lock now, as Kured's annotation says.
func (k *kureds) lockHolders(ctx context.Context) ([]string, error) {
	ds, err := k.c.Client.AppsV1().DaemonSets(kuredNamespace).Get(ctx, "kured", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return kuredproc.Holders(ds.Annotations[kured.LockAnnotation])
}

// kuredMessage is the msg of a line of Kured's text log.
var kuredMessage = regexp.MustCompile(`msg="((?:[^"\\]|\\.)*)"`)

// kuredSays are the beginnings of Kured's messages the demo shows.
var kuredSays = []string{"Reboot required", "Lock already held", "Draining node", "Triggering reboot", "Uncordoning node"}

// showKured is the Kured phase: Kured's sentinel on two nodes and a
// maintenance asked on a third, at once. It prints what Kured says, who
// holds Kured's lock, and every cordon, plays the reboots Kured commands,
// and checks at the end that never two nodes were cordoned at once.
func showKured(ctx context.Context, o options, k *kureds, tl *timeline.Timeline, nodes []string, procs *[]*exec.Cmd) error {
	if len(nodes) < 3 {
		return fmt.Errorf("--kured needs 3 nodes or more, got %d", len(nodes))
	}
	rebooting, maintained := []string{nodes[0], nodes[len(nodes)-1]}, nodes[len(nodes)/2]
	fmt.Printf("\nKured beside the agents: %s need a reboot (Kured's sentinel), and a maintenance is asked on %s at the same time; Kustodian's agents hold Kured's lock while they maintain, Kured waits for it, and they wait for Kured's\n",
		strings.Join(rebooting, " and "), maintained)
	fmt.Println(`lines starting with "kured |" are Kured's own messages, Kured's lock and the Nodes' cordons`)
	cordons, err := watchCordons(ctx, k.c, nodes)
	if err != nil {
		return err
	}
	for _, n := range rebooting {
		if err := os.WriteFile(k.proc(n).Sentinel(), nil, 0o644); err != nil {
			return err
		}
	}
	script, err := startScript(o, maintained)
	if err != nil {
		return err
	}
	*procs = append(*procs, script)
	scriptDone := make(chan error, 1)
	go func() { scriptDone <- script.Wait() }()

	rebooted := map[string]bool{}
	said := map[string]map[string]bool{} // the messages shown of each node's Kured since it started
	read := map[string]int{}             // the lines of its log read
	lastLock := "?"
	scriptOver := false
	// waiting says what the phase still waits for ("" once it is over); an
	// error ends the demo.
	waiting := func() (string, error) {
		for _, n := range nodes {
			p := k.proc(n)
			lines := strings.Split(p.Log(), "\n")
			lines = lines[:len(lines)-1] // the last is not whole yet
			fresh := lines[min(read[n], len(lines)):]
			read[n] += len(fresh)
			for _, line := range fresh {
				m := kuredMessage.FindStringSubmatch(line)
				if m == nil || !saysSomething(m[1]) || said[n][m[1]] {
					continue
				}
				if said[n] == nil {
					said[n] = map[string]bool{}
				}
				said[n][m[1]] = true
				fmt.Printf("kured | Kured on %s: %s\n", n, m[1])
			}
			if p.Rebooted() && !rebooted[n] {
				rebooted[n] = true
				fmt.Printf("kured | %s: Kured ran its reboot command; the demo reboots it: Kured starts again on a host that needs none\n", n)
				if err := k.reboot(n); err != nil {
					return "", err
				}
				said[n], read[n] = nil, 0
			}
		}
		holders, err := k.lockHolders(ctx)
		if err != nil {
			return "", err
		}
		if lock := strings.Join(holders, ", "); lock != lastLock {
			lastLock = lock
			fmt.Printf("kured | Kured's lock: %s\n", lockSays(holders))
		}
		select {
		case err := <-scriptDone:
			scriptOver = true
			if err != nil {
				return "", fmt.Errorf("the maintenance script on %s failed (%w): it keeps its request, so %s stays cordoned; its output is in %s",
					maintained, err, maintained, filepath.Join(o.workdir, maintained, "script.log"))
			}
		default:
		}
		switch {
		case len(rebooted) < len(rebooting):
			return fmt.Sprintf("Kured has rebooted %d of %d nodes", len(rebooted), len(rebooting)), nil
		case len(holders) > 0:
			return "Kured's lock is " + lockSays(holders), nil
		case !scriptOver:
			return "the maintenance of " + maintained + " is not over", nil
		case cordons.now() > 0:
			return fmt.Sprintf("%d nodes are cordoned", cordons.now()), nil
		}
		if err := tl.AllIdle(nodes); err != nil {
			return err.Error(), nil
		}
		return "", nil
	}
	// Kured waits 30-90 s after each start: two reboots take minutes.
	deadline := time.Now().Add(8 * time.Minute)
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var shown string
	var shownAt time.Time
	for {
		still, err := waiting()
		if err != nil {
			return err
		}
		if still == "" {
			break
		}
		if still != shown || time.Since(shownAt) > 30*time.Second {
			shown, shownAt = still, time.Now()
			fmt.Printf("kured | waiting: %s\n", still)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Kured phase did not end within 8 minutes: %s", still)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	most, when := cordons.most()
	fmt.Printf("\nKured rebooted %s and Kustodian maintained %s, taking turns: at most %d node(s) cordoned at once (%s)\n",
		strings.Join(rebooting, " and "), maintained, len(most), when)
	if len(most) > 1 {
		return fmt.Errorf("%d nodes were cordoned at once: %v", len(most), most)
	}
	return nil
}

// lockSays tells who holds Kured's lock: Kured on a node, or Kustodian's
// agent of a node during its maintenance (holder kustodian:NODE).
func lockSays(holders []string) string {
	if len(holders) == 0 {
		return "free"
	}
	var who []string
	for _, h := range holders {
		if node, ok := strings.CutPrefix(h, "kustodian:"); ok {
			who = append(who, "Kustodian's agent on "+node+", during its maintenance")
		} else {
			who = append(who, "Kured on "+h)
		}
	}
	return "held by " + strings.Join(who, "; ")
}

func saysSomething(msg string) bool {
	for _, s := range kuredSays {
		if strings.HasPrefix(msg, s) {
			return true
		}
	}
	return false
}

// cordonWatch follows the Nodes' spec.unschedulable through an informer
// (which lists again when its watch is lost) and prints every change.
type cordonWatch struct {
	mu       sync.Mutex
	cordoned map[string]bool
	peak     []string
	peakAt   time.Time
}

func watchCordons(ctx context.Context, c *cluster.Cluster, nodes []string) (*cordonWatch, error) {
	w := &cordonWatch{cordoned: map[string]bool{}}
	ours := map[string]bool{}
	for _, n := range nodes {
		ours[n] = true
	}
	f := informers.NewSharedInformerFactory(c.Client, 0)
	inf := f.Core().V1().Nodes().Informer()
	seen := func(obj any) {
		if n, ok := obj.(*corev1.Node); ok && ours[n.Name] {
			w.set(n.Name, n.Spec.Unschedulable)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) }}); err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, errors.New("the Nodes' informer did not sync")
	}
	return w, nil
}

func (w *cordonWatch) set(node string, cordoned bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cordoned[node] == cordoned {
		return
	}
	w.cordoned[node] = cordoned
	var now []string
	for n, c := range w.cordoned {
		if c {
			now = append(now, n)
		}
	}
	verb := "uncordoned"
	if cordoned {
		verb = "cordoned"
	}
	fmt.Printf("kured | %s %s; cordoned now: %d\n", node, verb, len(now))
	if len(now) > len(w.peak) {
		w.peak, w.peakAt = now, time.Now()
	}
}

func (w *cordonWatch) now() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, c := range w.cordoned {
		if c {
			n++
		}
	}
	return n
}

func (w *cordonWatch) most() ([]string, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.peakAt.IsZero() {
		return nil, "none"
	}
	return w.peak, strings.Join(w.peak, ", ") + " at " + w.peakAt.Format("15:04:05")
}
