package nodecmd

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/kustodian/kustodian/internal/doctor"
)

func TestCredentials(t *testing.T) {
	exp := time.Now().Add(10*24*time.Hour + time.Hour).Unix()
	claims := fmt.Sprintf(`{"exp":%d,"kubernetes.io":{"namespace":"kustodian","node":{"name":"n1","uid":"u1"},"serviceaccount":{"name":"kustodian-agent"}}}`, exp)
	token := "e30." + base64.RawURLEncoding.EncodeToString([]byte(claims)) + ".sig"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kc := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: "` + token + `"}}]
contexts: [{name: k, context: {cluster: c, user: u}}]
current-context: k
`
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		cmd := newCredentialsCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		conf := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(conf, []byte("namespace: kustodian\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd.SetArgs(append([]string{"--config", conf, "--kubeconfig", path}, args...))
		if err := cmd.Execute(); err != nil {
			t.Fatal(err)
		}
		return out.String()
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
