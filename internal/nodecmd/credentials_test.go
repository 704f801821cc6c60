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
}
