package agentopts

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/notify"
	"github.com/kustodian/kustodian/internal/notify/notifytest"
)

func load(t *testing.T, file string, env map[string]string, args ...string) (config.Agent, error) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	cf := AddFlags(fs)
	if file != "" {
		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", path)
	} else {
		// Stands for the default path, on a host without a config file.
		cf.ConfigFile = filepath.Join(t.TempDir(), "absent-default.yaml")
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return cf.Load()
}

func TestLoadPrecedence(t *testing.T) {
	file := "namespace: from-file\nqueue:\n  heartbeat: 7s\ndrain:\n  timeout: 5m\n  onTimeout: release\n  force: true\ngates:\n  poll: 2s\n"
	cfg, err := load(t, file,
		map[string]string{"KUSTODIAN_NAMESPACE": "from-env", "KUSTODIAN_QUEUE_HEARTBEAT": "3s"},
		"--namespace", "from-flag")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Namespace != "from-flag" {
		t.Errorf("namespace %q: a flag beats the environment and the file", cfg.Namespace)
	}
	if cfg.Queue.Heartbeat != 3*time.Second {
		t.Errorf("heartbeat %s: the environment beats the file", cfg.Queue.Heartbeat)
	}
	if cfg.Drain.Timeout != 5*time.Minute || cfg.Drain.OnTimeout != "release" || !cfg.Drain.Force || cfg.Gates.Poll != 2*time.Second {
		t.Errorf("file values not applied: %+v %+v", cfg.Drain, cfg.Lock)
	}
	if cfg.Drain.EvictErrorRetryDelay != 5*time.Second || cfg.Gates.CommandTimeout != 20*time.Second {
		t.Errorf("defaults lost: %+v", cfg)
	}
}

func TestLoadFlagBeatsEnvEvenWhenEqualToDefault(t *testing.T) {
	cfg, err := load(t, "", map[string]string{"KUSTODIAN_STAY": "true"}, "--stay=false")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Stay {
		t.Error("the environment overrode an explicit flag")
	}
}

func TestLoadErrorsNameTheSource(t *testing.T) {
	for name, tc := range map[string]struct {
		file string
		env  map[string]string
		args []string
		want string
	}{
		"unknown key":                  {file: "drain:\n  timout: 5m\n", want: `config.yaml: unknown key "drain.timout"; did you mean drain.timeout?`},
		"unknown key, in its case":     {file: "drain:\n  onTimout: hold\n", want: `config.yaml: unknown key "drain.onTimout"; did you mean drain.onTimeout?`},
		"mistyped state directory":     {args: []string{"--state-dir", "/var/lib/kustodain"}, want: `--state-dir: /var/lib/kustodain cannot be used (no such file or directory); create it (mkdir -m 0700 /var/lib/kustodain) or fix the path`},
		"a key that moved to policies": {file: "lock:\n  slots: 2\n", want: `config.yaml: lock.slots is no longer an agent setting: how many nodes go at once is a MaintenancePolicy's concurrency (docs/policy.md); remove it`},
		"bad duration in file":         {file: "drain:\n  timeout: 5 minutes\n", want: `config.yaml: drain.timeout: "5 minutes" is not a duration`},
		"duration without unit":        {file: "queue:\n  heartbeat: 10\n", want: `queue.heartbeat: "10" is not a duration`},
		"bad duration in env":          {env: map[string]string{"KUSTODIAN_RESYNC": "soon"}, want: `KUSTODIAN_RESYNC: "soon" is not a duration`},
		"bad bool in env":              {env: map[string]string{"KUSTODIAN_DRAIN_FORCE": "maybe"}, want: `KUSTODIAN_DRAIN_FORCE: "maybe" is not true or false`},
		"invalid value in file":        {file: "drain:\n  onTimeout: panic\n", want: `config.yaml: drain.onTimeout: "panic" is not one of hold, release`},
		"invalid value from flag":      {args: []string{"--gates-poll", "1ms"}, want: `--gates-poll: must be at least 500ms`},
		"relative path from env":       {env: map[string]string{"KUSTODIAN_REQUEST_FILE": "req"}, want: `KUSTODIAN_REQUEST_FILE: "req" is not an absolute path`},
		"missing directory in flag":    {args: []string{"--in-progress-file", "/nonexistent/x"}, want: `--in-progress-file: the directory of /nonexistent/x cannot be used`},
		"not YAML":                     {file: "drain: [\n", want: "configuration file"},
		"zero retry delay":             {args: []string{"--drain-evict-error-retry-delay", "0s"}, want: "--drain-evict-error-retry-delay: must be at least 100ms"},
		"textfile node_exporter skips": {file: "metrics:\n  textfile: /tmp/kustodian.txt\n", want: `config.yaml: metrics.textfile: "/tmp/kustodian.txt" does not end in .prom`},
		"listen without a port":        {file: "metrics:\n  listen: localhost\n", want: `config.yaml: metrics.listen: "localhost" is not an address like 127.0.0.1:9842 (host:port; empty for none)`},
		"listen on no port":            {args: []string{"--metrics-listen", "127.0.0.1:http"}, want: `--metrics-listen: "127.0.0.1:http" is not an address like 127.0.0.1:9842 (host:port; empty for none)`},
		"notify URLs as a string":      {file: "notify:\n  urls: generic://127.0.0.1:9/x\n", want: `config.yaml: notify.urls: is not a list; give one item per line, each starting with "- "`},
		"a list for a string":          {file: "drain:\n  podSelector: [a, b]\n", want: `config.yaml: drain.podSelector: is a list or a map; give a single value`},
		"unknown notify service":       {file: "notify:\n  urls:\n    - nosuch://t0ken@host\n", want: `config.yaml: notify.urls: URL 1 (nosuch): `},
		"bad notify URL in env":        {env: map[string]string{"KUSTODIAN_NOTIFY_URLS": "generic://127.0.0.1:9/x slack://hook:short@webhook"}, want: `KUSTODIAN_NOTIFY_URLS: URL 2 (slack): `},
		"bad notify template":          {args: []string{"--notify-failed", "{{.Nodename}}"}, want: `--notify-failed: template: failed:1:2: can't evaluate field Nodename (a notification has .Duration`},
		"namespace with capitals":      {args: []string{"--namespace", "Kustodian"}, want: `--namespace: "Kustodian" is not a valid namespace name: a lowercase RFC 1123 label must consist of`},
		"textfile in no directory":     {args: []string{"--metrics-textfile", "/nonexistent/k.prom"}, want: `--metrics-textfile: the directory of /nonexistent/k.prom cannot be used`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := load(t, tc.file, tc.env, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Errorf("the error is not one line: %q", err)
			}
		})
	}
}

// notify.urls is a list in the file, one URL per flag (repeated), and
// separated by spaces in the environment.
func TestLoadNotifyURLs(t *testing.T) {
	a, b := "generic://127.0.0.1:9/a?disabletls=yes", "generic://127.0.0.1:9/b?disabletls=yes"
	for name, tc := range map[string]struct {
		file string
		env  map[string]string
		args []string
	}{
		"file": {file: "notify:\n  urls:\n    - " + a + "\n    - " + b + "\n"},
		"env":  {env: map[string]string{"KUSTODIAN_NOTIFY_URLS": " " + a + "  " + b + " "}},
		"flag": {file: "notify:\n  urls: [generic://127.0.0.1:9/c]\n", args: []string{"--notify-urls", a, "--notify-urls", b}},
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := load(t, tc.file, tc.env, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cfg.Notify.URLs, []string{a, b}) {
				t.Errorf("urls %q", cfg.Notify.URLs)
			}
		})
	}
}

func TestLoadWarnings(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	cf := AddFlags(fs)
	var warned bytes.Buffer
	cf.Warn = &warned
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte("drain:\n  ontimeout: release\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUSTODIAN_DRAIN_TIMEOUTS", "5m")
	t.Setenv("KUSTODIAN_NAMESPACE", "")
	t.Setenv("KUSTODIAN_RESYNC", " ")
	if err := fs.Parse([]string{"--config", path}); err != nil {
		t.Fatal(err)
	}
	cfg, err := cf.Load()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Namespace != "kustodian" || cfg.Resync != 30*time.Second {
		t.Errorf("an empty variable counted as set: namespace %q, resync %s", cfg.Namespace, cfg.Resync)
	}
	if cfg.Drain.OnTimeout != "release" {
		t.Errorf("a key in another case was not read: onTimeout %q", cfg.Drain.OnTimeout)
	}
	for _, want := range []string{
		"warning: environment variable KUSTODIAN_DRAIN_TIMEOUTS is not one of kustodian's and is ignored; did you mean KUSTODIAN_DRAIN_TIMEOUT?\n",
		"warning: " + path + ": key drain.ontimeout is read as drain.onTimeout; write it so\n",
	} {
		if !strings.Contains(warned.String(), want) {
			t.Errorf("warnings\n%s\nlack %q", warned.String(), want)
		}
	}
}

func TestLoadMissingExplicitFile(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	cf := AddFlags(fs)
	if err := fs.Parse([]string{"--config", "/nonexistent/config.yaml"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cf.Load(); err == nil || !strings.Contains(err.Error(), "/nonexistent/config.yaml") {
		t.Fatalf("got %v, want an error naming the missing file", err)
	}
}

func TestEveryOptionHasAFlagAndAKnownType(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	AddFlags(fs) // panics on an unsupported type
	for _, flag := range []string{"config", "kubeconfig", "node-name", "namespace", "request-file", "in-progress-file", "reboot-sentinel", "state-dir", "stay"} {
		if fs.Lookup(flag) == nil {
			t.Errorf("flag --%s of the command-line contract is missing", flag)
		}
	}
}

// The packages' /etc/kustodian/config.yaml is what the code generates (make
// docs), every option is in it, and uncommented it is exactly the defaults.
func TestDefaultConfigFile(t *testing.T) {
	want := DefaultConfigFile()
	got, err := os.ReadFile("../../packaging/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("packaging/config.yaml differs from what the code generates: run make docs")
	}
	// Uncomment every setting: "#Key: v", "#  Key: v" and their "## text"
	// and "#  # text" comments; the header ("# text") stays a comment.
	setting := regexp.MustCompile(`^#(#|[A-Za-z]|  )`)
	var uncommented []string
	for _, line := range strings.Split(string(want), "\n") {
		if setting.MatchString(line) {
			line = line[1:]
		}
		uncommented = append(uncommented, line)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(strings.Join(uncommented, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	v, problems, warnings := readFile(path, true)
	if len(problems) > 0 || len(warnings) > 0 {
		t.Fatal(problems, warnings)
	}
	for _, o := range Options {
		if !v.IsSet(o.Key) {
			t.Errorf("key %s is missing from the default config file", o.Key)
		}
	}
	cf := AddFlags(pflag.NewFlagSet("test", pflag.ContinueOnError))
	cf.ConfigFile = path
	_ = cf.flags.Set("config", path)
	cfg, err := cf.Load()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, config.Defaults()) {
		t.Errorf("the uncommented default config file gives\n%+v\nwant the defaults\n%+v", cfg, config.Defaults())
	}
}

// The notify URLs of a configuration are checked by the kustodian-notify
// helper, as in the agent.
func TestMain(m *testing.M) { notifytest.Main(m.Run, func(p string) { notify.Helper = p }) }
