package nodecmd

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/kustodian/kustodian/internal/doctor"
)

// credentialsRun runs kustodian credentials on a kubeconfig holding a
// token with these claims.
func credentialsRun(t *testing.T, claims string, args ...string) (string, error) {
	t.Helper()
	token := "e30." + base64.RawURLEncoding.EncodeToString([]byte(claims)) + ".sig"
	dir := t.TempDir()
	path := filepath.Join(dir, "kubeconfig")
	kc := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: "` + token + `"}}]
contexts: [{name: k, context: {cluster: c, user: u}}]
current-context: k
`
	conf := filepath.Join(dir, "config.yaml")
	for file, text := range map[string]string{path: kc, conf: "namespace: kustodian\n"} {
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cmd := newCredentialsCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	cmd.SetArgs(append([]string{"--config", conf, "--kubeconfig", path}, args...))
	err := cmd.Execute()
	return out.String(), err
}

func TestCredentials(t *testing.T) {
	exp := time.Now().Add(10*24*time.Hour + time.Hour).Unix()
	claims := fmt.Sprintf(`{"exp":%d,"kubernetes.io":{"namespace":"kustodian","node":{"name":"n1","uid":"u1"},"serviceaccount":{"name":"kustodian-agent"}}}`, exp)
	run := func(args ...string) string {
		out, err := credentialsRun(t, claims, args...)
		if err != nil {
			t.Fatalf("credentials %v: %v\n%s", args, err, out)
		}
		return out
	}
	if got := run(); !strings.Contains(got, "a token of kustodian/kustodian-agent bound to node n1; expires ") || !strings.Contains(got, "(in 10d)") {
		t.Errorf("text: %q", got)
	}
	var c Credentials
	if err := json.Unmarshal([]byte(run("-o", "json")), &c); err != nil {
		t.Fatal(err)
	}
	if c.Node != "n1" || c.ExpiresInSeconds < 10*24*3600 || c.ExpiresInSeconds > 11*24*3600 || c.Expires != time.Unix(exp, 0).UTC().Format(time.RFC3339) {
		t.Errorf("json: %+v", c)
	}
	var y Credentials
	if err := yaml.Unmarshal([]byte(run("-o", "yaml")), &y); err != nil || y.Node != "n1" || y.Expires != c.Expires {
		t.Errorf("yaml: %+v, %v", y, err)
	}
}

// A token the agent cannot work with (bound to no Node, or expired) is
// said, printed all the same, and exits 2, so that a script that reads
// only the exit status does not take it for a good one. (Seen: a
// ServiceAccount's token bound to no Node exited 0.)
func TestCredentialsRefuseATokenTheAgentCannotUse(t *testing.T) {
	later, earlier := time.Now().Add(24*time.Hour).Unix(), time.Now().Add(-time.Hour).Unix()
	for _, tc := range []struct {
		name, claims, says string
	}{
		{"bound to no Node", fmt.Sprintf(`{"exp":%d,"kubernetes.io":{"namespace":"kustodian","serviceaccount":{"name":"kustodian-agent"}}}`, later), "a token not bound to a Node"},
		{"expired", fmt.Sprintf(`{"exp":%d,"kubernetes.io":{"namespace":"kustodian","node":{"name":"n1","uid":"u1"},"serviceaccount":{"name":"kustodian-agent"}}}`, earlier), "expired at "},
	} {
		for _, args := range [][]string{nil, {"-o", "json"}} {
			out, err := credentialsRun(t, tc.claims, args...)
			var code interface{ ExitCode() int }
			if !errors.As(err, &code) || code.ExitCode() != 2 {
				t.Errorf("%s %v: %v, want exit 2\n%s", tc.name, args, err, out)
			}
			if args == nil && !strings.Contains(out, tc.says) {
				t.Errorf("%s: %q does not say %q", tc.name, out, tc.says)
			}
			if args != nil && json.Unmarshal([]byte(out), &Credentials{}) != nil {
				t.Errorf("%s -o json: not JSON: %q", tc.name, out)
			}
		}
	}
}

// doctor prints its findings as JSON or YAML alike.
func TestFindingsAsYAML(t *testing.T) {
	findings := []doctor.Finding{{Check: "kubeconfig", Status: doctor.OK, Message: "bound to node n1"}}
	var j, y bytes.Buffer
	if err := printFindings(&j, "json", "n1", findings); err != nil {
		t.Fatal(err)
	}
	if err := printFindings(&y, "yaml", "n1", findings); err != nil {
		t.Fatal(err)
	}
	var fromJSON, fromYAML map[string]any
	if err := json.Unmarshal(j.Bytes(), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(y.Bytes(), &fromYAML); err != nil || !strings.Contains(y.String(), "status: ok") || fmt.Sprint(fromJSON) != fmt.Sprint(fromYAML) {
		t.Errorf("yaml %v:\n%s\njson:\n%s", err, y.String(), j.String())
	}
}

// Kured's flags as Kured takes them: a KURED_REBOOT_SENTINEL_COMMAND
// variable comes after every flag of the command line, so the doctor
// judges the value Kured uses.
func TestKuredArgsEndWithItsVariables(t *testing.T) {
	ds := &appsv1.DaemonSet{}
	ds.Spec.Template.Spec.Containers = []corev1.Container{{
		Command: []string{"/usr/bin/kured", "--reboot-sentinel-command=/usr/bin/kustodian reboot-gate"},
		Args:    []string{"--period=1h"},
		Env:     []corev1.EnvVar{{Name: "KURED_NODE_ID", Value: "n1"}, {Name: "KURED_REBOOT_SENTINEL_COMMAND", Value: "/bin/true"}},
	}}
	got := strings.Join(kuredArgs(ds), " ")
	if want := "/usr/bin/kured --reboot-sentinel-command=/usr/bin/kustodian reboot-gate --period=1h --reboot-sentinel-command=/bin/true"; got != want {
		t.Errorf("kuredArgs = %q, want %q", got, want)
	}
}
