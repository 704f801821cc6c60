// Package config is the agent's configuration: one typed struct with its
// defaults and its validation. Reading it from the file, the environment and
// the flags is the command layer's job (internal/nodecmd).
package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/kustodian/kustodian/internal/hostfiles"
	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/internal/notify"
)

// DefaultFile is the configuration file read when --config is not given.
const DefaultFile = "/etc/kustodian/config.yaml"

// Agent configures `kustodian agent` and the host-side subcommands.
type Agent struct {
	Kubeconfig     string
	NodeName       string // empty: from the token, else the hostname
	Namespace      string
	RequestFile    string
	InProgressFile string
	RebootSentinel string
	StateDir       string
	Stay           bool
	Resync         time.Duration
	LogFormat      string // auto, text or json

	Lock     Lock
	Queue    Queue
	Drain    Drain
	Kured    Kured
	Gates    Gates
	Metrics  Metrics
	Notify   Notify
	Rollouts Rollouts
	// ClusterRequests: see requests.go.
	ClusterRequests ClusterRequests

	RebootRequired RebootRequired

	// Alertmanager and Prometheus list the servers a MaintenancePolicy
	// may name, with the credentials this host sends each.
	Alertmanager Remote
	Prometheus   Remote
}

// Remote is the host's allow-list of one kind of server.
type Remote struct {
	Endpoints Endpoints
}

// RebootRequired says how this host tells that it needs a reboot, for the
// policies whose triggers.rebootRequired lets the agent ask for one.
type RebootRequired struct {
	// Command, run with /bin/sh -c, exits 0 when the host needs a reboot
	// and 1 when not; "": RebootSentinel exists, or needs-restarting -r
	// (the RHEL family) says so.
	Command string
}

// RebootCheck is how this host tells that it needs a reboot.
func (a Agent) RebootCheck() hostfiles.RebootCheck {
	c := hostfiles.RebootCheck{Sentinel: a.RebootSentinel, Command: a.RebootRequired.Command}
	if c.Command == "" {
		c.NeedsRestarting = hostfiles.FindNeedsRestarting()
	}
	return c
}

// DefaultTrustedKeys is the file of the keys whose rollouts a host runs.
const DefaultTrustedKeys = "/etc/kustodian/rollout-keys"

// Rollouts configures MaintenanceRollouts on this host.
type Rollouts struct {
	// Enabled: run the rollouts that select this node and are signed by
	// a key of TrustedKeys. The agent then keeps running (stay).
	Enabled bool
	// TrustedKeys is a file of OpenSSH public keys, one per line.
	TrustedKeys string
}

// Notify configures the notifications the agent sends.
type Notify struct {
	// URLs are shoutrrr URLs (slack://, teams://, smtp://, generic://...);
	// none: no notifications.
	URLs []string
	// Go templates of the message per event (notify.Data); "" sends
	// nothing for that event.
	Started, Completed, Failed, Blocked string
}

// Templates are the templates by event.
func (n Notify) Templates() map[notify.Event]string {
	return map[notify.Event]string{notify.Started: n.Started, notify.Completed: n.Completed, notify.Failed: n.Failed, notify.Blocked: n.Blocked}
}

// Metrics configures where the agent's metrics go.
type Metrics struct {
	// Textfile is the node_exporter textfile written on every change:
	// "auto" (TextfileAuto, when node_exporter's textfile directory
	// exists), a path, or "" (none).
	Textfile string
	// Listen is the address of the HTTP endpoint served while the agent
	// runs ("" for none).
	Listen string
}

// DefaultMetricsListen is where the agent serves its metrics by default:
// on the host only (node_exporter's textfile is what Prometheus scrapes
// from afar).
const DefaultMetricsListen = "127.0.0.1:9842"

// TextfileAuto is where metrics.textfile "auto" writes, when its directory
// exists (Debian's and Ubuntu's prometheus-node-exporter read it).
const TextfileAuto = "/var/lib/prometheus/node-exporter/kustodian.prom"

// MetricsTextfile resolves metrics.textfile: a path, or "" for none.
func (a Agent) MetricsTextfile() string {
	if a.Metrics.Textfile != "auto" {
		return a.Metrics.Textfile
	}
	if st, err := os.Stat(filepath.Dir(TextfileAuto)); err == nil && st.IsDir() {
		return TextfileAuto
	}
	return ""
}

// Gates configures the host-side gate and how often the head of a queue
// re-reads the cluster-wide gates of its policy (docs/policy.md).
type Gates struct {
	// Command, when set, runs on the host (through /bin/sh -c) before the
	// agent tries the lock; non-zero blocks, its last line is the reason.
	Command        string
	CommandTimeout time.Duration
	Poll           time.Duration
}

// CommandDeadline bounds gates.command: its timeout, and at most two
// heartbeats, since the agent beats no heartbeat while it waits for it.
func (a Agent) CommandDeadline() time.Duration {
	return min(a.Gates.CommandTimeout, 2*a.Queue.Heartbeat)
}

// Kured configures the interplay with Kured's lock.
type Kured struct {
	// Enabled: "auto" (when Kured's DaemonSet exists), "true" or "false".
	Enabled   string
	Namespace string
	DaemonSet string
	// LockAnnotations are the annotation keys of Kured's DaemonSet that
	// Kustodian reads and holds Kured's lock under, besides the key
	// Kured's own --lock-annotation names.
	LockAnnotations []string
}

// Lock configures the lock Leases. How many nodes may go at once, and in
// which groups, is the MaintenancePolicy's to say, so that two hosts never
// disagree on it.
type Lock struct {
	TTL time.Duration // 0: the lock never expires
}

// Queue configures the agent's record.
type Queue struct {
	Heartbeat time.Duration
}

// StaleAfter is how long a record may go without a heartbeat before its agent
// counts as gone: four beats.
func (q Queue) StaleAfter() time.Duration { return 4 * q.Heartbeat }

// Drain configures k8s.io/kubectl/pkg/drain.
type Drain struct {
	Timeout                  time.Duration // 0: none
	OnTimeout                string        // hold or release
	DeleteEmptyDirData       bool
	Force                    bool
	EvictErrorRetryDelay     time.Duration
	PodSelector              string
	SkipWaitForDeleteTimeout time.Duration
	// KubeletKubeconfig is the kubelet's kubeconfig, with which the agent
	// lists and evicts this node's pods: the API server holds a kubelet's
	// identity to its own node's pods (Node authorizer, NodeRestriction).
	// KubeletKubeconfigAuto finds it on the usual paths (KubeletKubeconfigs),
	// KubeletKubeconfigNone uses the agent's own credentials.
	KubeletKubeconfig string
}

// The special values of drain.kubeletKubeconfig.
const (
	KubeletKubeconfigAuto = "auto"
	KubeletKubeconfigNone = "none"
)

// KubeletKubeconfigs are where kubelets keep their kubeconfig, tried in
// this order by drain.kubeletKubeconfig auto: kubeadm, EKS and GKE, k3s,
// RKE2. The unit (systemd/kustodian.service) leaves them and the client
// credentials they name readable.
var KubeletKubeconfigs = []string{
	"/etc/kubernetes/kubelet.conf",
	"/var/lib/kubelet/kubeconfig",
	"/var/lib/rancher/k3s/agent/kubelet.kubeconfig",
	"/var/lib/rancher/rke2/agent/kubelet.kubeconfig",
}

// Drain timeout policies.
const (
	OnTimeoutHold    = "hold"
	OnTimeoutRelease = "release"
)

const defaultStateDir = "/var/lib/kustodian"

// Defaults returns the built-in configuration.
func Defaults() Agent {
	return Agent{
		Kubeconfig:     "/etc/kustodian/kubeconfig",
		Namespace:      "kustodian",
		RequestFile:    hostfiles.DefaultRequest,
		InProgressFile: hostfiles.DefaultInProgress,
		RebootSentinel: hostfiles.DefaultRebootSentinel,
		StateDir:       defaultStateDir,
		Resync:         30 * time.Second,
		LogFormat:      "auto",
		Gates:          Gates{CommandTimeout: 20 * time.Second, Poll: 5 * time.Second},
		Queue:          Queue{Heartbeat: 10 * time.Second},
		Drain: Drain{
			OnTimeout:            OnTimeoutHold,
			DeleteEmptyDirData:   true,
			EvictErrorRetryDelay: 5 * time.Second,
			KubeletKubeconfig:    KubeletKubeconfigAuto,
		},
		Kured:    Kured{Enabled: "auto", Namespace: "kube-system", DaemonSet: "kured", LockAnnotations: slices.Clone(kured.LockAnnotations)},
		Rollouts: Rollouts{TrustedKeys: DefaultTrustedKeys},
		Metrics:  Metrics{Textfile: "auto", Listen: DefaultMetricsListen},
		Notify: Notify{
			Started:   notify.DefaultTemplates[notify.Started],
			Completed: notify.DefaultTemplates[notify.Completed],
			Failed:    notify.DefaultTemplates[notify.Failed],
			Blocked:   notify.DefaultTemplates[notify.Blocked],
		},
	}
}

// Files are the host protocol's paths.
func (a Agent) Files() hostfiles.Files {
	return hostfiles.Files{Request: a.RequestFile, InProgress: a.InProgressFile, RebootSentinel: a.RebootSentinel}
}

// FieldError names the configuration key that is wrong.
type FieldError struct {
	Key string
	Err error
}

func (e *FieldError) Error() string { return e.Key + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// Validate checks everything that can be checked without the cluster and
// returns the first problem, or nil.
func (a Agent) Validate() error {
	if p := a.Problems(); len(p) > 0 {
		return p[0]
	}
	return nil
}

// Problems checks everything that can be checked without the cluster and
// returns every problem, each a *FieldError, in the order of the keys.
func (a Agent) Problems() []*FieldError {
	var problems []*FieldError
	bad := func(key, format string, args ...any) {
		problems = append(problems, &FieldError{Key: key, Err: fmt.Errorf(format, args...)})
	}
	if a.Kubeconfig == "" {
		bad("kubeconfig", "is empty; give the path of the node's kubeconfig")
	}
	if errs := validation.IsDNS1123Label(a.Namespace); len(errs) > 0 {
		bad("namespace", "%q is not a valid namespace name: %s", a.Namespace, strings.Join(errs, "; "))
	}
	for _, f := range []struct {
		key, path    string
		dirMustExist bool
	}{
		{"requestFile", a.RequestFile, true},
		{"inProgressFile", a.InProgressFile, true},
		// /var/run may appear late in boot; the sentinel's absence is just read.
		{"rebootSentinel", a.RebootSentinel, false},
		{"stateDir", a.StateDir, false},
	} {
		if err := checkPath(f.path, f.dirMustExist); err != nil {
			problems = append(problems, &FieldError{Key: f.key, Err: err})
		}
	}
	// The default state directory is the package's (and systemd's
	// StateDirectory=); any other must exist, so that a mistyped path is
	// refused instead of created.
	if d := a.StateDir; d != defaultStateDir && filepath.IsAbs(d) {
		if st, err := os.Stat(d); err != nil {
			bad("stateDir", "%s cannot be used (%v); create it (mkdir -m 0700 %s) or fix the path", d, unwrapPathError(err), d)
		} else if !st.IsDir() {
			bad("stateDir", "%s is not a directory", d)
		}
	}
	if a.RequestFile == a.InProgressFile {
		bad("inProgressFile", "is the same file as requestFile (%s)", a.RequestFile)
	}
	if a.Resync <= 0 {
		bad("resync", "must be positive, got %s", a.Resync)
	}
	switch a.LogFormat {
	case "auto", "text", "json":
	default:
		bad("logFormat", "%q is not one of auto, text, json", a.LogFormat)
	}
	if a.Lock.TTL < 0 {
		bad("lock.ttl", "must not be negative, got %s", a.Lock.TTL)
	}
	if a.Lock.TTL > 0 && a.Lock.TTL < 2*a.Queue.Heartbeat {
		bad("lock.ttl", "%s is shorter than two heartbeats (%s): the holder could not renew it in time", a.Lock.TTL, 2*a.Queue.Heartbeat)
	}
	if a.Queue.Heartbeat < 100*time.Millisecond {
		bad("queue.heartbeat", "must be at least 100ms, got %s", a.Queue.Heartbeat)
	}
	if a.Drain.Timeout < 0 {
		bad("drain.timeout", "must not be negative, got %s", a.Drain.Timeout)
	}
	if a.Drain.OnTimeout != OnTimeoutHold && a.Drain.OnTimeout != OnTimeoutRelease {
		bad("drain.onTimeout", "%q is not one of hold, release", a.Drain.OnTimeout)
	}
	if a.Drain.EvictErrorRetryDelay < 100*time.Millisecond {
		// Zero would make the drain retry a PDB's 429 in a busy loop.
		bad("drain.evictErrorRetryDelay", "must be at least 100ms, got %s", a.Drain.EvictErrorRetryDelay)
	}
	if a.Drain.SkipWaitForDeleteTimeout < 0 {
		bad("drain.skipWaitForDeleteTimeout", "must not be negative, got %s", a.Drain.SkipWaitForDeleteTimeout)
	}
	switch k := a.Drain.KubeletKubeconfig; {
	case k == KubeletKubeconfigAuto, k == KubeletKubeconfigNone:
	case !filepath.IsAbs(k):
		bad("drain.kubeletKubeconfig", "%q is not auto, none or an absolute path", k)
	}
	if a.Gates.CommandTimeout < time.Second {
		bad("gates.commandTimeout", "must be at least 1s, got %s", a.Gates.CommandTimeout)
	}
	if a.Gates.Poll < 500*time.Millisecond {
		bad("gates.poll", "must be at least 500ms, got %s", a.Gates.Poll)
	}
	switch a.Kured.Enabled {
	case "auto", "true", "false":
	default:
		bad("kured.enabled", "%q is not one of auto, true, false", a.Kured.Enabled)
	}
	if errs := validation.IsDNS1123Label(a.Kured.Namespace); len(errs) > 0 {
		bad("kured.namespace", "%q is not a valid namespace name: %s", a.Kured.Namespace, strings.Join(errs, "; "))
	}
	if len(a.Kured.LockAnnotations) == 0 {
		bad("kured.lockAnnotations", "is empty; list the annotation keys Kured keeps its lock under (default: %s)", strings.Join(kured.LockAnnotations, ", "))
	}
	for _, k := range a.Kured.LockAnnotations {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			bad("kured.lockAnnotations", "%q is not an annotation key: %s", k, strings.Join(errs, "; "))
		}
	}
	if a.Kured.DaemonSet == "" {
		bad("kured.daemonSet", "is empty")
	}
	if a.Rollouts.Enabled && !filepath.IsAbs(a.Rollouts.TrustedKeys) {
		bad("rollouts.trustedKeys", "%q is not an absolute path: with rollouts.enabled the agent runs only rollouts signed by a key in that file", a.Rollouts.TrustedKeys)
	}
	if _, err := labels.Parse(a.Drain.PodSelector); err != nil {
		bad("drain.podSelector", "%q is not a label selector: %v", a.Drain.PodSelector, err)
	}
	if t := a.Metrics.Textfile; t != "" && t != "auto" {
		if err := checkPath(t, true); err != nil {
			problems = append(problems, &FieldError{Key: "metrics.textfile", Err: err})
		}
		if !strings.HasSuffix(t, ".prom") {
			bad("metrics.textfile", "%q does not end in .prom: node_exporter reads only *.prom files", t)
		}
	}
	if l := a.Metrics.Listen; l != "" {
		_, port, err := net.SplitHostPort(l)
		if n, perr := strconv.Atoi(port); err != nil || perr != nil || n < 1 || n > 65535 {
			bad("metrics.listen", "%q is not an address like 127.0.0.1:9842 (host:port; empty for none)", l)
		}
	}
	problems = append(problems, a.Alertmanager.Endpoints.problems("alertmanager.endpoints")...)
	problems = append(problems, a.Prometheus.Endpoints.problems("prometheus.endpoints")...)
	for i, u := range a.Notify.URLs {
		if err := notify.CheckURL(u); err != nil {
			bad("notify.urls", "URL %d (%s): %v", i+1, notify.Redacted(u), err)
		}
	}
	for ev, text := range a.Notify.Templates() {
		if _, err := notify.ParseTemplate(ev, text); err != nil {
			bad("notify."+string(ev), "%v", err)
		}
	}
	return problems
}

func checkPath(path string, dirMustExist bool) error {
	if path == "" {
		return errors.New("is empty")
	}
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%q is not an absolute path", path)
	}
	if !dirMustExist {
		return nil
	}
	dir := filepath.Dir(path)
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("the directory of %s cannot be used: %w", path, err)
	}
	if !st.IsDir() {
		return fmt.Errorf("%s is not a directory", dir)
	}
	return nil
}

// unwrapPathError drops the path an *os.PathError repeats.
func unwrapPathError(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
