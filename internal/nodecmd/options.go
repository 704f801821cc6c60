package nodecmd

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/kustodian/kustodian/internal/config"
)

// envPrefix prefixes the environment variable of every option:
// --drain-timeout is KUSTODIAN_DRAIN_TIMEOUT.
const envPrefix = "KUSTODIAN_"

// option ties one field of config.Agent to its config key, flag and
// environment variable.
type option struct {
	key   string // in the config file: "drain.onTimeout"
	flag  string // "drain-on-timeout"
	usage string
	field func(*config.Agent) any // a *string, *bool, *int or *time.Duration
}

func (o option) env() string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(o.flag, "-", "_"))
}

// agentOptions are the options of `kustodian agent` and of the host-side
// subcommands; their names are a contract (docs/design.md, "Configuration and commands").
var agentOptions = []option{
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
	{"queue.heartbeat", "queue-heartbeat", "how often the agent renews its node record; 4 missed beats make it stale", func(a *config.Agent) any { return &a.Queue.Heartbeat }},
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
	{"gates.command", "gates-command", "a command (run with /bin/sh -c) that must succeed before this node takes the lock; its last line of output is the reason it blocks", func(a *config.Agent) any { return &a.Gates.Command }},
	{"gates.commandTimeout", "gates-command-timeout", "a gates.command running longer than this (and never longer than two heartbeats) is stopped and blocks", func(a *config.Agent) any { return &a.Gates.CommandTimeout }},
	{"gates.poll", "gates-poll", "how often the node at the head of its queue re-checks its policy's cluster-wide gates and gates.command", func(a *config.Agent) any { return &a.Gates.Poll }},
	{"metrics.textfile", "metrics-textfile", "node_exporter textfile the agent writes its metrics to on every change and keeps between runs: auto (" + config.TextfileAuto + " when its directory exists), a path ending in .prom, or empty for none", func(a *config.Agent) any { return &a.Metrics.Textfile }},
	{"metrics.listen", "metrics-listen", "serve the metrics over HTTP (/metrics) on this address while the agent runs; empty for none. A port in use is logged, not fatal", func(a *config.Agent) any { return &a.Metrics.Listen }},
	{"notify.urls", "notify-urls", "shoutrrr URLs (slack://, teams://, smtp://, generic://...) the agent sends its notifications to: a list in the file, one URL per flag, separated by spaces in the environment. Keep this file readable by root only: the URLs hold tokens (and prefer it to the flag, which shows them in the process list)", func(a *config.Agent) any { return &a.Notify.URLs }},
	{"notify.started", "notify-started", "Go template of the message sent when the node takes the lock and begins to drain; fields .Node .Reason .Message .Group .Policy .Time .Requested .Duration (the wait); empty: none", func(a *config.Agent) any { return &a.Notify.Started }},
	{"notify.completed", "notify-completed", "Go template of the message sent when the maintenance is over and the node is back (.Duration: since the request); empty: none", func(a *config.Agent) any { return &a.Notify.Completed }},
	{"notify.failed", "notify-failed", "Go template of the message sent when the maintenance fails: a drain, a job, an admin's release (.Message says which); empty: none", func(a *config.Agent) any { return &a.Notify.Failed }},
	{"notify.blocked", "notify-blocked", "Go template of the message sent when the node has waited past its policy's health.blockedAfter (.Message: what blocks it); empty: none", func(a *config.Agent) any { return &a.Notify.Blocked }},
}

// configFlags holds the flags of a command whose options are agentOptions.
type configFlags struct {
	configFile string
	values     config.Agent // what the flags parsed into
	flags      *pflag.FlagSet
}

// addConfigFlags registers --config and every option's flag.
func addConfigFlags(fs *pflag.FlagSet) *configFlags {
	cf := &configFlags{values: config.Defaults(), flags: fs}
	fs.StringVar(&cf.configFile, "config", config.DefaultFile, "configuration file (YAML); a missing default file is fine ("+envPrefix+"CONFIG)")
	for _, o := range agentOptions {
		usage := fmt.Sprintf("%s (%s, key %s)", o.usage, o.env(), o.key)
		switch p := o.field(&cf.values).(type) {
		case *string:
			fs.StringVar(p, o.flag, *p, usage)
		case *bool:
			fs.BoolVar(p, o.flag, *p, usage)
		case *int:
			fs.IntVar(p, o.flag, *p, usage)
		case *time.Duration:
			fs.DurationVar(p, o.flag, *p, usage)
		case *[]string:
			fs.StringArrayVar(p, o.flag, *p, usage)
		default:
			panic("option " + o.key + " has an unsupported type") // a programming error, caught by the tests
		}
	}
	return cf
}

// load builds the configuration: flag > environment > file > default. A bad
// value is refused with one line naming where it came from.
func (cf *configFlags) load() (config.Agent, error) {
	cfg := config.Defaults()
	path, explicit := cf.configFile, cf.flags.Changed("config")
	if v, ok := os.LookupEnv(envPrefix + "CONFIG"); ok && !explicit {
		path, explicit = v, true
	}
	file, err := readFile(path, explicit)
	if err != nil {
		return cfg, err
	}
	sources := map[string]string{}
	for _, o := range agentOptions {
		dst := o.field(&cfg)
		var raw, source string
		switch {
		case cf.flags.Changed(o.flag):
			// pflag parsed and checked it already.
			copyValue(dst, o.field(&cf.values))
			sources[o.key] = "--" + o.flag
			continue
		case lookupEnv(o.env(), &raw):
			source = o.env()
		case file != nil && file.IsSet(o.key):
			source = path + ": " + o.key
			v := file.Get(o.key)
			if list, ok := dst.(*[]string); ok {
				sources[o.key] = source
				if err := listInto(list, v); err != nil {
					return cfg, fmt.Errorf("%s: %w", source, err)
				}
				continue
			}
			switch v.(type) {
			case []any, map[string]any:
				return cfg, fmt.Errorf("%s: is a list or a map; give a single value", source)
			}
			raw = fmt.Sprint(v)
		default:
			sources[o.key] = "default"
			continue
		}
		sources[o.key] = source
		if err := parseInto(dst, raw); err != nil {
			return cfg, fmt.Errorf("%s: %w", source, err)
		}
	}
	if err := cfg.Validate(); err != nil {
		var fe *config.FieldError
		if errors.As(err, &fe) {
			if src := sources[fe.Key]; src != "" && src != "default" {
				return cfg, fmt.Errorf("%s: %w", src, fe.Err)
			}
		}
		return cfg, fmt.Errorf("configuration: %w", err)
	}
	return cfg, nil
}

func lookupEnv(name string, into *string) bool {
	v, ok := os.LookupEnv(name)
	if ok {
		*into = v
	}
	return ok
}

// removedKeys were agent settings before MaintenancePolicies: a file that
// still has them gets told where they went.
var removedKeys = map[string]string{
	"lock.group":     "groups are a MaintenancePolicy's groupBy (docs/policy.md)",
	"lock.slots":     "how many nodes go at once is a MaintenancePolicy's concurrency (docs/policy.md)",
	"queue.priority": "priority is the Node annotation kustodian.io/priority, set by an admin",
}

// readFile reads the YAML file and refuses unknown keys. nil, nil when the
// default file does not exist.
func readFile(path string, explicit bool) (*viper.Viper, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) && !explicit {
		return nil, nil
	}
	v := viper.New()
	v.SetConfigFile(path)
	v.SetConfigType("yaml")
	if err := v.ReadInConfig(); err != nil {
		// YAML's errors span lines ("unmarshal errors:\n  line 1: ..."):
		// the refusal is one.
		return nil, fmt.Errorf("configuration file %s: %s", path, strings.Join(strings.Fields(err.Error()), " "))
	}
	known := map[string]bool{}
	for _, o := range agentOptions {
		known[strings.ToLower(o.key)] = true
	}
	var unknown []string
	for _, k := range v.AllKeys() {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		if why, ok := removedKeys[unknown[0]]; ok {
			return nil, fmt.Errorf("%s: %s is no longer an agent setting: %s; remove it", path, unknown[0], why)
		}
		return nil, fmt.Errorf("%s: unknown key %q; known keys are listed by kustodian agent --help", path, unknown[0])
	}
	return v, nil
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
