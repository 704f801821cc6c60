package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/kustodian/kustodian/internal/history"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/status"
)

// fakeAPI answers what the commands under test ask, and records the writes.
type fakeAPI struct {
	*httptest.Server
	mu     sync.Mutex
	writes []string // "METHOD path?query"
}

func newFakeAPI(t *testing.T) *fakeAPI {
	f := &fakeAPI{}
	nodes := corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"}}
	for _, n := range []string{"node-b", "node-a", "gpu-1"} {
		nodes.Items = append(nodes.Items, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
	}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodGet {
			f.mu.Lock()
			f.writes = append(f.writes, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
			f.mu.Unlock()
		}
		switch {
		case r.URL.Path == "/api/v1/nodes":
			_ = json.NewEncoder(w).Encode(nodes)
		case r.URL.Path == "/api/v1/nodes/node-a":
			_ = json.NewEncoder(w).Encode(corev1.Node{TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "node-a"}})
		case r.URL.Path == "/api/v1/namespaces/kustodian":
			_ = json.NewEncoder(w).Encode(corev1.Namespace{TypeMeta: metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "kustodian"}})
		case r.URL.Path == "/api/v1/namespaces/kustodian/configmaps/"+lock.ControlConfigMap:
			cm := corev1.ConfigMap{TypeMeta: metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"},
				ObjectMeta: metav1.ObjectMeta{Name: lock.ControlConfigMap, Namespace: "kustodian", ResourceVersion: "1"}, Data: map[string]string{"paused": "false"}}
			_ = json.NewDecoder(r.Body).Decode(&cm) // a write answers with what it was sent
			_ = json.NewEncoder(w).Encode(cm)
		default:
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Failure", Reason: metav1.StatusReasonNotFound, Code: 404, Message: r.URL.Path + " not found"})
		}
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPI) takeWrites() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.writes
	f.writes = nil
	return w
}

// run runs kustodian-ctl (as invokedAs) with args, with no kubeconfig of
// the machine's.
func run(t *testing.T, invokedAs string, args ...string) (string, error) {
	t.Helper()
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	t.Setenv("HOME", t.TempDir())
	var out bytes.Buffer
	root := NewRoot(genericiooptions.IOStreams{In: os.Stdin, Out: &out, ErrOut: &out}, invokedAs)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// -A is kubectl's all namespaces: status says what it means here instead
// of taking it for --all.
func TestStatusAllNamespaces(t *testing.T) {
	_, err := run(t, "kustodian-ctl", "status", "-A")
	if err == nil || !strings.Contains(err.Error(), "-A/--all-namespaces: an installation of Kustodian lives in one namespace; name it with -n") {
		t.Errorf("status -A: %v", err)
	}
}

func TestDryRunValues(t *testing.T) {
	for _, args := range [][]string{{"install", "--dry-run=client"}, {"install", "--dry-run"}} {
		out, err := run(t, "kustodian-ctl", args...)
		if err != nil || !strings.Contains(out, "kind: ValidatingAdmissionPolicy") {
			t.Errorf("%v: %v\n%.300s", args, err, out)
		}
	}
	if _, err := run(t, "kustodian-ctl", "install", "--dry-run=maybe"); err == nil || !strings.Contains(err.Error(), `"maybe" is not one of none, client, server`) {
		t.Errorf("--dry-run=maybe: %v", err)
	}
	for _, cmd := range []string{"install", "uninstall", "pause", "resume", "release", "kubeconfig"} {
		out, _ := run(t, "kustodian-ctl", cmd, "--help")
		if !strings.Contains(out, "--dry-run none|client|server") {
			t.Errorf("%s has no --dry-run=none|client|server:\n%s", cmd, out)
		}
	}
}

// --dry-run=server sends every write with dryRun=All; client sends none.
func TestServerDryRun(t *testing.T) {
	api := newFakeAPI(t)
	for _, tc := range []struct {
		dry, want string
	}{
		{"--dry-run=server", "dryRun=All"},
		{"--dry-run=none", ""},
	} {
		out, err := run(t, "kustodian-ctl", "-s", api.URL, "pause", "--reason", "r", tc.dry)
		if err != nil {
			t.Fatalf("pause %s: %v\n%s", tc.dry, err, out)
		}
		writes := api.takeWrites()
		if len(writes) == 0 {
			t.Fatalf("pause %s wrote nothing", tc.dry)
		}
		for _, w := range writes {
			if strings.Contains(w, "dryRun=All") != (tc.want != "") {
				t.Errorf("pause %s sent %s", tc.dry, w)
			}
		}
		if tc.want != "" && !strings.HasSuffix(out, "(server dry run)\n") {
			t.Errorf("pause %s said %q", tc.dry, out)
		}
	}
	out, err := run(t, "kustodian-ctl", "-s", api.URL, "pause", "--dry-run=client")
	if w := api.takeWrites(); err != nil || len(w) > 0 || !strings.HasSuffix(out, "(dry run)\n") {
		t.Errorf("pause --dry-run=client: %v, wrote %v, said %q", err, w, out)
	}
}

// kubeconfig leaves -s/--server to the API server, writes to stdout or
// --output-file, and refuses -f (kubectl's input file).
func TestKubeconfigFlags(t *testing.T) {
	api := newFakeAPI(t)
	// -s reaches the fake API server, which has no ServiceAccount: the
	// error is its answer, not a flag error.
	_, err := run(t, "kustodian-ctl", "kubeconfig", "node-a", "-s", api.URL, "--dry-run=client")
	if err == nil || !strings.Contains(err.Error(), "no ServiceAccount kustodian-agent in namespace kustodian") {
		t.Errorf("kubeconfig -s: %v", err)
	}
	_, err = run(t, "kustodian-ctl", "kubeconfig", "node-a", "-f", "node-a.kubeconfig")
	if err == nil || !strings.Contains(err.Error(), "-f is kubectl's input file, not an output: write the kubeconfig with --output-file node-a.kubeconfig") {
		t.Errorf("kubeconfig -f: %v", err)
	}
}

// Completion offers node names, policies and -o values, as kubectl's does.
func TestCompletion(t *testing.T) {
	api := newFakeAPI(t)
	for _, tc := range []struct {
		args []string
		want []string
		not  []string
	}{
		{[]string{"status", "node-"}, []string{"node-a", "node-b"}, []string{"gpu-1"}},
		{[]string{"release", ""}, []string{"gpu-1", "node-a", "node-b"}, nil},
		{[]string{"wait", "node-a", "node"}, []string{"node-b"}, []string{"node-a"}},
		{[]string{"status", "-o", ""}, []string{"wide", "json", "yaml", "name", "jsonpath=", "custom-columns="}, nil},
		{[]string{"wait", "--for", ""}, []string{"idle", "waiting", "maintenance", "done"}, nil},
		{[]string{"policy", ""}, []string{"default"}, nil},
		{[]string{"install", "--dry-run="}, []string{"none", "client", "server"}, nil},
	} {
		out, err := run(t, "kustodian-ctl", append([]string{"__complete", "-s", api.URL}, tc.args...)...)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		lines := strings.Split(out, "\n")
		for _, w := range tc.want {
			if !contains(lines, w) {
				t.Errorf("completing %q: %q lacks %q", tc.args, out, w)
			}
		}
		for _, n := range tc.not {
			if contains(lines, n) {
				t.Errorf("completing %q: %q offers %q", tc.args, out, n)
			}
		}
	}
}

func contains(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}

// As kubectl's plugin, help and errors name `kubectl kustodian`.
func TestPluginMode(t *testing.T) {
	out, err := run(t, "/usr/bin/kubectl-kustodian", "release", "--help")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "kubectl kustodian release node-3") || strings.Contains(out, "kustodian-ctl release") {
		t.Errorf("plugin help:\n%s", out)
	}
	out, _ = run(t, "/usr/bin/kubectl-kustodian", "install", "--help")
	if !strings.Contains(out, "field manager kustodian-ctl") {
		t.Errorf("the field manager was renamed:\n%s", out)
	}
	e := &status.NotInstalledError{Namespace: "kustodian"}
	if got := ErrorLine("/usr/local/bin/kubectl-kustodian", e); got != "kubectl kustodian: Kustodian is not installed in namespace kustodian; run kubectl kustodian install, or pass -n" {
		t.Errorf("plugin error: %q", got)
	}
	if got := ErrorLine("kustodian-ctl", e); got != "kustodian-ctl: "+e.Error() {
		t.Errorf("error: %q", got)
	}
}

func TestWaitConditions(t *testing.T) {
	at := time.Date(2026, 11, 25, 10, 1, 0, 0, time.UTC)
	ok := &history.Entry{Ended: at, Result: history.Succeeded}
	bad := &history.Entry{Ended: at, Result: history.Failed}
	for _, tc := range []struct {
		state lock.State
		cond  string
		ended *history.Entry // the last since --since
		want  bool
	}{
		{lock.Idle, forIdle, nil, true},
		{lock.Waiting, forIdle, nil, false},
		{lock.Waiting, forWaiting, nil, true},
		{lock.Draining, forWaiting, nil, true},
		{lock.Idle, forWaiting, ok, false},
		{lock.Draining, forMaintenance, nil, false},
		{lock.InMaintenance, forMaintenance, nil, true},
		{lock.Rebooting, forMaintenance, nil, true},
		{lock.Idle, forMaintenance, ok, true}, // a quick one, missed between polls
		{lock.Idle, forMaintenance, bad, false},
		{lock.Idle, forDone, nil, false}, // not picked up yet, or withdrawn
		{lock.Idle, forDone, ok, true},
		{lock.Idle, forDone, bad, false}, // repaired, not done
		{lock.InMaintenance, forDone, ok, false},
	} {
		got, verdict := meets(status.Node{Name: "n", State: tc.state}, tc.cond, tc.ended)
		if got != tc.want {
			t.Errorf("%s --for=%s (ended %+v): %v (%s), want %v", tc.state, tc.cond, tc.ended, got, verdict, tc.want)
		}
	}
}

// wait exits 0 when the nodes are there, 4 on a Failed node, 3 at the
// timeout, and 1 for a node that does not exist.
func TestWaitExitCodes(t *testing.T) {
	now := time.Now()
	failed := coordv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lock.RecordName("n1"), Namespace: "kustodian"}}
	lock.Record{Node: "n1", State: lock.Failed, Since: now, Message: "job patch exited 3", RequestID: "r1", Group: "default",
		QueueKey: "1", Requested: now, Heartbeat: now}.ApplyTo(&failed)
	client := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kustodian"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{Unschedulable: true}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}},
		// Repaired after a failure: Idle, its last maintenance failed.
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n4", Annotations: map[string]string{
			history.Annotation: history.Append("", history.Entry{Requested: now, Ended: now.Add(time.Second), Result: history.Failed, Message: "job patch exited 3"})}}},
		&failed,
	)
	r := status.Reader{Client: client, Namespace: "kustodian"}
	defer func(p time.Duration) { waitPoll = p }(waitPoll)
	waitPoll = 10 * time.Millisecond
	for _, tc := range []struct {
		nodes []string
		cond  string
		code  int
		want  string
	}{
		{[]string{"n2"}, forIdle, 0, "n2: Idle\n"},
		{[]string{"n2", "n1"}, forDone, ExitFailed, "node n1 is Failed: job patch exited 3"},
		{[]string{"n2"}, forWaiting, ExitTimeout, "timed out waiting for --for=waiting; last seen: n2: Idle"},
		{[]string{"n3"}, forIdle, 1, `node "n3" not found`},
		{[]string{"n4"}, forDone, ExitFailed, "the maintenance of node n4 that ended"},
		{[]string{"n4"}, forIdle, 0, "n4: Idle"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		var out bytes.Buffer
		err := waitFor(ctx, r, tc.nodes, tc.cond, now, &out)
		cancel()
		if ExitCode(err) != tc.code {
			t.Errorf("wait %v --for=%s: exit %d (%v), want %d", tc.nodes, tc.cond, ExitCode(err), err, tc.code)
		}
		if got := out.String() + fmt.Sprint(err); !strings.Contains(got, tc.want) {
			t.Errorf("wait %v --for=%s said %q, want %q", tc.nodes, tc.cond, got, tc.want)
		}
	}
	// Interrupted (Ctrl-C cancels the context): not a timeout.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	err := waitFor(ctx, r, []string{"n2"}, forWaiting, now, io.Discard)
	if code := ExitCode(err); code != 1 || !strings.Contains(fmt.Sprint(err), "interrupted") {
		t.Errorf("an interrupted wait: exit %d (%v), want 1", code, err)
	}
}
