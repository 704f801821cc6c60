package ctl

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The command line's own mistakes are said in its terms, before any API
// server is asked (run has no kubeconfig: a command that reached for one
// would say so instead).
func TestCommandLineMistakesAreNamed(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status"}, "no kubeconfig found: pass --kubeconfig FILE, set KUBECONFIG, or create ~/.kube/config"},
		{[]string{"release"}, "kustodian-ctl release needs NODE: kustodian-ctl release NODE"},
		{[]string{"release", "a", "b"}, "kustodian-ctl release takes one NODE, got 2 (a b)"},
		{[]string{"rollout", "status"}, "kustodian-ctl rollout status needs NAME: kustodian-ctl rollout status NAME"},
		{[]string{"pause", "a", "b"}, "kustodian-ctl pause takes at most one NODE, got 2 (a b)"},
		{[]string{"queue", "node-1"}, `kustodian-ctl queue takes no arguments, got "node-1"`},
		{[]string{"status", "--watc"}, "unknown flag: --watc; did you mean --watch?"},
		{[]string{"plan", "--polcy", "p"}, "did you mean --policy?"},
		{[]string{"plan", "--start", "yesterday"}, `--start "yesterday": give a time as`},
		{[]string{"plan", "node-1", "-l", "a=b"}, `-l "a=b" and nodes named (node-1): give one or the other`},
		{[]string{"plan", "-l", "a=(b"}, `-l "a=(b": `},
	} {
		_, err := run(t, "kustodian-ctl", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant it to say: %s", strings.Join(tc.args, " "), err, tc.want)
		}
		if err != nil && tc.want != "" && !strings.Contains(tc.want, "kubeconfig") && strings.Contains(err.Error(), "kubeconfig") {
			t.Errorf("%s: asked for the cluster before saying what is wrong: %v", strings.Join(tc.args, " "), err)
		}
	}
}

// version: this binary's alone with --client (no cluster asked), the API
// server's and the agents' beside it otherwise (with a warning on skew), as
// lines, json or yaml.
func TestVersion(t *testing.T) {
	out, err := run(t, "kustodian-ctl", "version", "--client", "-o", "json")
	var v versions
	if err != nil || json.Unmarshal([]byte(out), &v) != nil || v.Client.Version == "" || v.Client.GoVersion == "" || v.Server != nil {
		t.Fatalf("version --client -o json: %v\n%s", err, out)
	}
	out, err = run(t, "kustodian-ctl", "version")
	if err == nil || !strings.Contains(err.Error(), "no kubeconfig found") || !strings.HasPrefix(out, "Client: kustodian-ctl ") {
		t.Fatalf("version without a cluster: %v\n%s", err, out)
	}
	// Three agents said their versions on their Nodes, two of one, one of
	// another; a fourth Node has no agent that said one.
	node := func(name, version string) string {
		if version == "" {
			return `{"metadata": {"name": "` + name + `"}}`
		}
		return `{"metadata": {"name": "` + name + `", "annotations": {"kustodian.io/agent-version": "` + version + `"}}}`
	}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/version":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"gitVersion": "v1.37.1", "platform": "linux/amd64"}`))
		case "/api/v1/nodes":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"kind": "NodeList", "apiVersion": "v1", "items": [` + strings.Join([]string{
				node("node-c", "v9.9.9"), node("node-a", "v9.9.8"), node("node-b", "v9.9.9"), node("node-d", ""), node("node-e", `v1\u001b[2J`)}, ",") + `]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	out, err = run(t, "kustodian-ctl", "version", "-s", api.URL)
	for _, want := range []string{
		"Server: Kubernetes v1.37.1 (linux/amd64)",
		"Agents: kustodian v9.9.9 on 2 node(s): node-b, node-c\n",
		"Agents: kustodian v9.9.8 on 1 node(s): node-a\n",
		"Agents: none has said its version on 1 node(s) (no agent started there since it could): node-d",
		"warning: the agents run 3 versions (v9.9.9 on 2, v1\\x1b[2J on 1, v9.9.8 on 1)",
		"warning: no agent runs kustodian-ctl's version v0.0.0-dev",
		// A node's own words, written out visibly.
		`Agents: kustodian v1\x1b[2J on 1 node(s): node-e`,
	} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("version: %v; want %q in:\n%s", err, want, out)
		}
	}
	out, err = run(t, "kustodian-ctl", "version", "-s", api.URL, "-o", "json")
	v = versions{}
	if err != nil || json.Unmarshal([]byte(out[:strings.LastIndex(out, "}")+1]), &v) != nil || len(v.Agents) != 3 || v.Agents[0].Version != "v9.9.9" ||
		strings.Join(v.Agents[0].Nodes, ",") != "node-b,node-c" || strings.Join(v.Unsaid, ",") != "node-d" {
		t.Errorf("version -o json: %v %+v\n%s", err, v, out)
	}
	out, err = run(t, "kustodian-ctl", "version", "-s", api.URL, "-o", "yaml")
	if err != nil || !strings.Contains(out, "gitVersion: v1.37.1") || !strings.Contains(out, "client:") {
		t.Fatalf("version -o yaml: %v\n%s", err, out)
	}
	if _, err := run(t, "kustodian-ctl", "version", "-o", "wide"); err == nil || !strings.Contains(err.Error(), "-o wide: version prints json or yaml") {
		t.Fatalf("version -o wide: %v", err)
	}
}

// A command carries the output flags of what it prints: rows sort and
// have custom columns; one object shown as a table has headers to leave
// out and nothing to sort; one shown as a line has neither. (Seen:
// rollout create took --no-headers and --sort-by and did nothing with
// them.)
func TestOutputFlagsFitWhatIsPrinted(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"rollout", "create", "x", "--no-headers"}, "unknown flag: --no-headers"},
		{[]string{"rollout", "create", "x", "--sort-by", ".node"}, "unknown flag: --sort-by"},
		{[]string{"rollout", "create", "x", "-o", "custom-columns=N:.metadata.name"}, "this command prints one object, not rows"},
		{[]string{"rollout", "status", "x", "--sort-by", ".node"}, "unknown flag: --sort-by"},
		{[]string{"rollout", "status", "x", "-o", "custom-columns-file=/dev/null"}, "this command prints one object, not rows"},
	} {
		_, err := run(t, "kustodian-ctl", tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v\nwant it to say: %s", strings.Join(tc.args, " "), err, tc.want)
		}
	}
	for _, args := range [][]string{
		{"rollout", "status", "x", "--no-headers"},
		{"status", "--no-headers", "--sort-by", ".node", "-o", "custom-columns=N:.node"},
	} {
		// Accepted: these go on to the cluster, which is not there.
		if _, err := run(t, "kustodian-ctl", args...); err == nil || !strings.Contains(err.Error(), "no kubeconfig found") {
			t.Errorf("%s: %v, want the flags taken and the kubeconfig missed", strings.Join(args, " "), err)
		}
	}
}
