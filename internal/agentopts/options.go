// Package agentopts reads the agent's options, the same for `kustodian
// agent` and the host commands: each one a key of the configuration file, a
// flag and an environment variable, with flag > environment > file >
// default, and every bad value refused with one line naming its source.
package agentopts

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"sigs.k8s.io/yaml"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/suggest"
)

// EnvPrefix prefixes the environment variable of every option:
// --drain-timeout is KUSTODIAN_DRAIN_TIMEOUT.
const EnvPrefix = "KUSTODIAN_"

// Option ties one field of config.Agent to its config key, flag and
// environment variable.
type Option struct {
	Key   string // in the config file: "drain.onTimeout"
	Flag  string // "drain-on-timeout"
	Usage string
	Field func(*config.Agent) any // a *string, *bool, *int, *time.Duration or *[]string
}

// notFromEnv are the options not read from the environment: lists whose
// items hold spaces, which an environment variable's value cannot keep
// apart.
var notFromEnv = map[string]bool{"alertmanager.endpoints": true, "prometheus.endpoints": true}

func (o Option) NoEnv() bool { return notFromEnv[o.Key] }

// Env is the option's environment variable, "" for none.
func (o Option) Env() string {
	if o.NoEnv() {
		return ""
	}
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(o.Flag, "-", "_"))
}

// Options are the options of `kustodian agent` and of the host-side
// subcommands; their names are a contract (docs/design.md, "Configuration and commands").
var Options = []Option{
	{"kubeconfig", "kubeconfig", "path of the node's kubeconfig", func(a *config.Agent) any { return &a.Kubeconfig }},
	{"nodeName", "node-name", "this node's Node name (default: the Node the kubeconfig's token is bound to, as the API server says, else the hostname, lower-cased)", func(a *config.Agent) any { return &a.NodeName }},
	{"namespace", "namespace", "namespace of Kustodian's Leases and control ConfigMap", func(a *config.Agent) any { return &a.Namespace }},
	{"requestFile", "request-file", "file whose presence requests maintenance", func(a *config.Agent) any { return &a.RequestFile }},
	{"inProgressFile", "in-progress-file", "file the agent creates once the node is drained", func(a *config.Agent) any { return &a.InProgressFile }},
	{"rebootSentinel", "reboot-sentinel", "file whose presence means a reboot is pending", func(a *config.Agent) any { return &a.RebootSentinel }},
	{"stateDir", "state-dir", "directory of the agent's own state (managed jobs, metrics kept between runs)", func(a *config.Agent) any { return &a.StateDir }},
	{"stay", "stay", "keep running when the node is back to Idle (default: exit 0, for the systemd path unit)", func(a *config.Agent) any { return &a.Stay }},
	{"resync", "resync", "re-read everything at least this often, besides reacting to events", func(a *config.Agent) any { return &a.Resync }},
	{"logFormat", "log-format", "log format: auto (text on a terminal, else JSON), text or json", func(a *config.Agent) any { return &a.LogFormat }},
	{"lock.ttl", "lock-ttl", "let a lock expire when its holder stops renewing it (0: never; the lock survives reboots). Refused with a node-bound token: no such agent may take over another's lock", func(a *config.Agent) any { return &a.Lock.TTL }},
	{"queue.heartbeat", "queue-heartbeat", "how often the agent renews its node record (every other beat while it waits far back in a queue); 4 missed beats make it stale", func(a *config.Agent) any { return &a.Queue.Heartbeat }},
	{"drain.timeout", "drain-timeout", "give up draining after this long (0: never)", func(a *config.Agent) any { return &a.Drain.Timeout }},
	{"drain.onTimeout", "drain-on-timeout", "after a drain timeout: hold (keep lock and cordon, state Failed) or release (give the node back, retry later)", func(a *config.Agent) any { return &a.Drain.OnTimeout }},
	{"drain.deleteEmptyDirData", "drain-delete-emptydir-data", "evict pods using emptyDir volumes (their data is lost)", func(a *config.Agent) any { return &a.Drain.DeleteEmptyDirData }},
	{"drain.force", "drain-force", "delete pods that no controller manages (they are not re-created)", func(a *config.Agent) any { return &a.Drain.Force }},
	{"drain.evictErrorRetryDelay", "drain-evict-error-retry-delay", "wait between eviction attempts a PodDisruptionBudget refused", func(a *config.Agent) any { return &a.Drain.EvictErrorRetryDelay }},
	{"drain.podSelector", "drain-pod-selector", "evict only pods matching this label selector", func(a *config.Agent) any { return &a.Drain.PodSelector }},
	{"drain.skipWaitForDeleteTimeout", "drain-skip-wait-for-delete-timeout", "do not wait for pods deleted longer ago than this (0: always wait)", func(a *config.Agent) any { return &a.Drain.SkipWaitForDeleteTimeout }},
	{"drain.kubeletKubeconfig", "drain-kubelet-kubeconfig", "list and evict this node's pods with the kubelet's kubeconfig, which the API server holds to this node's own pods: auto (the first of " + strings.Join(config.KubeletKubeconfigs, ", ") + " that exists), none (the agent's own credentials) or a path", func(a *config.Agent) any { return &a.Drain.KubeletKubeconfig }},
	{"kured.enabled", "kured-enabled", "honour Kured's lock and hold it during maintenance: auto (when its DaemonSet exists), true or false", func(a *config.Agent) any { return &a.Kured.Enabled }},
	{"kured.namespace", "kured-namespace", "namespace of Kured's DaemonSet", func(a *config.Agent) any { return &a.Kured.Namespace }},
	{"kured.daemonSet", "kured-daemonset", "name of Kured's DaemonSet, which carries its lock", func(a *config.Agent) any { return &a.Kured.DaemonSet }},
	{"kured.lockAnnotations", "kured-lock-annotations", "annotation keys of Kured's DaemonSet that Kured's lock is read and held under, besides the key Kured's own --lock-annotation names: both of Kured's by default, weave.works/kured-node-lock and, since its rewrite, kured.dev/kured-node-lock (the admission policy lets the agents write the keys of kustodian-ctl install --kured-lock-annotations)", func(a *config.Agent) any { return &a.Kured.LockAnnotations }},
	{"gates.command", "gates-command", "a command (run with /bin/sh -c) that must succeed before this node takes the lock; its last line of output is the reason it blocks", func(a *config.Agent) any { return &a.Gates.Command }},
	{"gates.commandTimeout", "gates-command-timeout", "a gates.command running longer than this (and never longer than two heartbeats) is stopped and blocks", func(a *config.Agent) any { return &a.Gates.CommandTimeout }},
	{"gates.poll", "gates-poll", "how often the node at the head of its queue re-checks its policy's cluster-wide gates and gates.command", func(a *config.Agent) any { return &a.Gates.Poll }},
	{"metrics.textfile", "metrics-textfile", "node_exporter textfile the agent writes its metrics to on every change and keeps between runs: auto (" + config.TextfileAuto + " when its directory exists), a path ending in .prom, or empty for none", func(a *config.Agent) any { return &a.Metrics.Textfile }},
	{"metrics.listen", "metrics-listen", "serve the metrics over HTTP (/metrics) on this address while the agent runs; empty for none. A port in use is logged, not fatal", func(a *config.Agent) any { return &a.Metrics.Listen }},
	{"rollouts.enabled", "rollouts-enabled", "run the MaintenanceRollouts that select this node and are signed by a key of rollouts.trustedKeys, each as a managed job through the queue (the agent then keeps running, as with stay)", func(a *config.Agent) any { return &a.Rollouts.Enabled }},
	{"rollouts.trustedKeys", "rollouts-trusted-keys", "file of the OpenSSH public keys (one per line, as in authorized_keys) whose signatures this host's agent accepts on rollouts", func(a *config.Agent) any { return &a.Rollouts.TrustedKeys }},
	{"clusterRequests.enabled", "cluster-requests-enabled", "keep running while the node is Idle, to take the maintenances asked from the cluster (kustodian-ctl request NODE) as soon as they are made; whenever the agent runs, it takes them anyway", func(a *config.Agent) any { return &a.ClusterRequests.Enabled }},
	{"rebootRequired.command", "reboot-required-command", "a command (run with /bin/sh -c) whose exit 0 says this host needs a reboot and 1 that it does not, as Kured's --reboot-sentinel-command; empty: rebootSentinel exists, or needs-restarting -r (the RHEL family) says so. Asked when the node's MaintenancePolicy has triggers.rebootRequired, and after a managed job", func(a *config.Agent) any { return &a.RebootRequired.Command }},
	{Key: "alertmanager.endpoints", Flag: "alertmanager-endpoints", Usage: "the Alertmanagers a MaintenancePolicy may name (spec.alertmanager.url), each with the credentials this host sends it: \"URL\", \"URL bearer FILE\" (a token) or \"URL basic FILE\" (username:password), one per list item or flag; a policy naming another URL is refused by this host. Not read from the environment", Field: func(a *config.Agent) any { return (*[]string)(&a.Alertmanager.Endpoints) }},
	{Key: "prometheus.endpoints", Flag: "prometheus-endpoints", Usage: "the Prometheus servers a MaintenancePolicy may name (spec.blockers.prometheus.url), as alertmanager.endpoints. Not read from the environment", Field: func(a *config.Agent) any { return (*[]string)(&a.Prometheus.Endpoints) }},
	{"notify.urls", "notify-urls", "shoutrrr URLs (slack://, teams://, smtp://, generic://...) the agent sends its notifications to: a list in the file, one URL per flag, separated by spaces in the environment. Keep this file readable by root only: the URLs hold tokens (and prefer it to the flag, which shows them in the process list)", func(a *config.Agent) any { return &a.Notify.URLs }},
	{"notify.started", "notify-started", "Go template of the message sent when the node takes the lock and begins to drain; fields .Node .Reason .Message .Group .Policy .Time .Requested .Duration (the wait); empty: none", func(a *config.Agent) any { return &a.Notify.Started }},
	{"notify.completed", "notify-completed", "Go template of the message sent when the maintenance is over and the node is back (.Duration: since the request); empty: none", func(a *config.Agent) any { return &a.Notify.Completed }},
	{"notify.failed", "notify-failed", "Go template of the message sent when the maintenance fails: a drain, a job, an admin's release (.Message says which); empty: none", func(a *config.Agent) any { return &a.Notify.Failed }},
	{"notify.blocked", "notify-blocked", "Go template of the message sent when the node has waited past its policy's health.blockedAfter (.Message: what blocks it); empty: none", func(a *config.Agent) any { return &a.Notify.Blocked }},
}

// Flags holds the flags of a command whose options are Options.
type Flags struct {
	ConfigFile string       // --config
	Warn       io.Writer    // where Load's warnings go; nil: stderr
	values     config.Agent // what the flags parsed into
	flags      *pflag.FlagSet
}

// AddFlags registers --config and every option's flag.
func AddFlags(fs *pflag.FlagSet) *Flags {
	cf := &Flags{values: config.Defaults(), flags: fs}
	fs.StringVar(&cf.ConfigFile, "config", config.DefaultFile, "configuration file (YAML); a missing default file is fine ("+EnvPrefix+"CONFIG)")
	for _, o := range Options {
		usage := fmt.Sprintf("%s (%s, key %s)", o.Usage, o.Env(), o.Key)
		if o.NoEnv() {
			usage = fmt.Sprintf("%s (key %s)", o.Usage, o.Key)
		}
		switch p := o.Field(&cf.values).(type) {
		case *string:
			fs.StringVar(p, o.Flag, *p, usage)
		case *bool:
			fs.BoolVar(p, o.Flag, *p, usage)
		case *int:
			fs.IntVar(p, o.Flag, *p, usage)
		case *time.Duration:
			fs.DurationVar(p, o.Flag, *p, usage)
		case *[]string:
			fs.StringArrayVar(p, o.Flag, *p, usage)
		default:
			panic("option " + o.Key + " has an unsupported type") // a programming error, caught by the tests
		}
	}
	return cf
}

// Load builds the configuration: flag > environment > file > default. A bad
// value is refused with one line naming where it came from; unknown
// KUSTODIAN_* variables and keys written in another case are warned about
// on stderr.
func (cf *Flags) Load() (config.Agent, error) {
	cfg, problems, warnings := cf.Resolve(true)
	w := cf.Warn
	if w == nil {
		w = os.Stderr
	}
	for _, s := range warnings {
		fmt.Fprintln(w, "warning: "+s)
	}
	if len(problems) > 0 {
		return cfg, problems[0]
	}
	return cfg, nil
}

// Resolve reads every source and returns the configuration with every
// problem found (each one line naming its source) and the warnings. With
// env false, the environment is not read (kustodian config check).
func (cf *Flags) Resolve(env bool) (cfg config.Agent, problems []error, warnings []string) {
	cfg = config.Defaults()
	path, explicit := cf.ConfigFile, cf.flags.Changed("config")
	if v, ok := lookupEnv(EnvPrefix+"CONFIG", env); ok && !explicit {
		path, explicit = v, true
	}
	file, problems, warnings := readFile(path, explicit)
	if file == nil && len(problems) > 0 {
		return cfg, problems, warnings
	}
	if env {
		warnings = append(warnings, unknownEnv(os.Environ())...)
	}
	sources := map[string]string{}
	for _, o := range Options {
		dst := o.Field(&cfg)
		var raw, source string
		switch {
		case cf.flags.Changed(o.Flag):
			// pflag parsed and checked it already.
			copyValue(dst, o.Field(&cf.values))
			sources[o.Key] = "--" + o.Flag
			continue
		case env && !o.NoEnv() && envValue(o.Env(), &raw):
			source = o.Env()
		case file != nil && file.IsSet(o.Key):
			source = path + ": " + o.Key
			v := file.Get(o.Key)
			if list, ok := dst.(*[]string); ok {
				sources[o.Key] = source
				if err := listInto(list, v); err != nil {
					problems = append(problems, fmt.Errorf("%s: %w", source, err))
				}
				continue
			}
			switch v.(type) {
			case []any, map[string]any:
				problems = append(problems, fmt.Errorf("%s: is a list or a map; give a single value", source))
				continue
			}
			raw = fmt.Sprint(v)
		default:
			sources[o.Key] = "default"
			continue
		}
		sources[o.Key] = source
		if err := parseInto(dst, raw); err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", source, err))
		}
	}
	for _, fe := range cfg.Problems() {
		if src := sources[fe.Key]; src != "" && src != "default" {
			problems = append(problems, fmt.Errorf("%s: %w", src, fe.Err))
		} else {
			problems = append(problems, fmt.Errorf("configuration: %w", fe))
		}
	}
	return cfg, problems, warnings
}

// envValue reads an option's environment variable: an empty one counts as
// unset (systemd's Environment=NAME= and an exported NAME= both mean
// "not given").
func envValue(name string, into *string) bool {
	v, ok := os.LookupEnv(name)
	if !ok || strings.TrimSpace(v) == "" {
		return false
	}
	*into = v
	return true
}

func lookupEnv(name string, env bool) (string, bool) {
	var v string
	return v, env && envValue(name, &v)
}

// otherEnv are the KUSTODIAN_* variables besides the options'.
var otherEnv = []string{EnvPrefix + "CONFIG", EnvPrefix + "DEBUG"}

// unknownEnv warns about KUSTODIAN_* variables that are no option's, with
// the closest known name.
func unknownEnv(environ []string) []string {
	known := append([]string(nil), otherEnv...)
	for _, o := range Options {
		if !o.NoEnv() {
			known = append(known, o.Env())
		}
	}
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, EnvPrefix) || slices.Contains(known, name) {
			continue
		}
		msg := fmt.Sprintf("environment variable %s is not one of kustodian's and is ignored", name)
		if s := suggest.Closest(name, known); s != "" {
			msg += fmt.Sprintf("; did you mean %s?", s)
		}
		out = append(out, msg)
	}
	sort.Strings(out)
	return out
}

// removedKeys were agent settings before MaintenancePolicies: a file that
// still has them gets told where they went.
var removedKeys = map[string]string{
	"lock.group":     "groups are a MaintenancePolicy's groupBy (docs/policy.md)",
	"lock.slots":     "how many nodes go at once is a MaintenancePolicy's concurrency (docs/policy.md)",
	"queue.priority": "priority is the Node annotation kustodian.io/priority, set by an admin",
}

// readFile reads the YAML file and refuses unknown keys, each with the
// closest known key. nil when the default file does not exist, or when the
// file cannot be read at all (the problem says why). A known key written in
// another case (viper matches keys in any case) is a warning.
func readFile(path string, explicit bool) (*viper.Viper, []error, []string) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && !explicit {
		return nil, nil, nil
	}
	if err != nil {
		return nil, []error{fmt.Errorf("configuration file: %w", err)}, nil
	}
	v := viper.New()
	v.SetConfigType("yaml")
	var tree map[string]any
	if err = yaml.Unmarshal(data, &tree); err == nil {
		err = v.ReadConfig(bytes.NewReader(data))
	}
	if err != nil {
		// YAML's errors span lines ("unmarshal errors:\n  line 1: ..."):
		// the refusal is one.
		return nil, []error{fmt.Errorf("configuration file %s: %s", path, strings.Join(strings.Fields(err.Error()), " "))}, nil
	}
	known := map[string]string{} // lower-cased: as documented
	var documented []string
	for _, o := range Options {
		known[strings.ToLower(o.Key)] = o.Key
		documented = append(documented, o.Key)
	}
	var problems []error
	var warnings []string
	for _, k := range leafKeys(tree, "") {
		want, ok := known[strings.ToLower(k)]
		switch {
		case ok && want != k:
			warnings = append(warnings, fmt.Sprintf("%s: key %s is read as %s; write it so", path, k, want))
		case ok:
		case removedKeys[strings.ToLower(k)] != "":
			problems = append(problems, fmt.Errorf("%s: %s is no longer an agent setting: %s; remove it", path, k, removedKeys[strings.ToLower(k)]))
		default:
			msg := fmt.Sprintf("%s: unknown key %q", path, k)
			if s := suggest.Closest(k, documented); s != "" {
				msg += fmt.Sprintf("; did you mean %s?", s)
			} else {
				msg += "; the keys are listed in /etc/kustodian/config.yaml as the package ships it and by kustodian agent --help"
			}
			problems = append(problems, errors.New(msg))
		}
	}
	return v, problems, warnings
}

// leafKeys are the dotted keys of a YAML tree's values, as written, sorted.
// A key that holds a map is a section (drain:), not a value, unless the map
// is empty.
func leafKeys(tree map[string]any, prefix string) []string {
	var out []string
	for k, v := range tree {
		if m, ok := v.(map[string]any); ok && len(m) > 0 {
			out = append(out, leafKeys(m, prefix+k+".")...)
			continue
		}
		out = append(out, prefix+k)
	}
	sort.Strings(out)
	return out
}

func copyValue(dst, src any) {
	switch d := dst.(type) {
	case *string:
		*d = *src.(*string)
	case *bool:
		*d = *src.(*bool)
	case *int:
		*d = *src.(*int)
	case *time.Duration:
		*d = *src.(*time.Duration)
	case *[]string:
		*d = append([]string(nil), *src.(*[]string)...)
	}
}

// listInto reads a YAML list of strings.
func listInto(dst *[]string, v any) error {
	items, ok := v.([]any)
	if !ok {
		return fmt.Errorf("is not a list; give one item per line, each starting with \"- \"")
	}
	out := make([]string, 0, len(items))
	for i, item := range items {
		s, ok := item.(string)
		if !ok || strings.TrimSpace(s) == "" {
			return fmt.Errorf("item %d is not a non-empty string", i+1)
		}
		out = append(out, strings.TrimSpace(s))
	}
	if len(out) == 0 {
		out = nil
	}
	*dst = out
	return nil
}

func parseInto(dst any, raw string) error {
	raw = strings.TrimSpace(raw)
	switch d := dst.(type) {
	case *string:
		*d = raw
	case *bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return fmt.Errorf("%q is not true or false", raw)
		}
		*d = b
	case *int:
		n, err := strconv.Atoi(raw)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", raw)
		}
		*d = n
	case *time.Duration:
		t, err := time.ParseDuration(raw)
		if err != nil {
			return fmt.Errorf("%q is not a duration; use a number with a unit, like 30s, 5m or 1h", raw)
		}
		*d = t
	case *[]string:
		*d = strings.Fields(raw)
	}
	return nil
}
