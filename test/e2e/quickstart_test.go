package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/dist"
)

// quickstartStep is one command of the README's quickstart: where it runs
// (the prompt's name: admin, node-1), the command, and the lines it is
// documented to print (<...> stands for anything).
type quickstartStep struct {
	where, command string
	prints         []string
	line           int // in README.md
}

var quickstartPrompt = regexp.MustCompile(`^([a-z0-9-]+)# (.+)$`)

// readQuickstart reads the commands of the README's section "Quickstart: a
// real cluster": every line with a prompt in its console blocks, and the
// lines after it up to the next prompt as what it prints. The sh block
// (building and serving the repository) is not run: the test builds the
// same repository from dist/ itself (make-repo.sh) and serves it.
func readQuickstart(t *testing.T, readme string) []quickstartStep {
	t.Helper()
	f, err := os.Open(readme)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var steps []quickstartStep
	var inSection, inConsole bool
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			inSection = line == "## Quickstart: a real cluster"
		case !inSection:
		case line == "```console":
			inConsole = true
		case strings.HasPrefix(line, "```"):
			inConsole = false
		case !inConsole:
		case quickstartPrompt.MatchString(line):
			m := quickstartPrompt.FindStringSubmatch(line)
			steps = append(steps, quickstartStep{where: m[1], command: m[2], line: n})
		case len(steps) > 0 && strings.TrimSpace(line) != "":
			last := &steps[len(steps)-1]
			last.prints = append(last.prints, line)
		}
	}
	if len(steps) < 10 {
		t.Fatalf("README.md: %d commands in the quickstart's console blocks; the section or its prompts (admin#, node-1#) moved", len(steps))
	}
	return steps
}

// printed tells whether out has a line that a documented line describes.
func printed(documented, out string) bool {
	var re strings.Builder
	re.WriteString(`^\s*`)
	for i, part := range strings.Split(strings.TrimSpace(documented), "<...>") {
		if i > 0 {
			re.WriteString(`.*`)
		}
		for j, word := range strings.Fields(part) {
			if j > 0 {
				re.WriteString(`\s+`)
			}
			re.WriteString(regexp.QuoteMeta(word))
		}
		if strings.HasSuffix(part, " ") && part != " " {
			re.WriteString(`\s+`)
		}
	}
	re.WriteString(`\s*$`)
	pattern := regexp.MustCompile(regexp.MustCompile(`<[a-z ]+>`).ReplaceAllLiteralString(re.String(), `.+`))
	for _, l := range strings.Split(out, "\n") {
		if pattern.MatchString(l) {
			return true
		}
	}
	return false
}

// The README's quickstart, run as written: an admin's machine and a node
// (booted systemd hosts, whose only package source is the signed
// repository made from dist/), the local control plane as the cluster.
// Each command runs in a root shell of its host with REPO set, and must
// succeed and print what the README shows.
func TestQuickstartFromTheREADME(t *testing.T) {
	steps := readQuickstart(t, filepath.Join(dist.RepoRoot(t), "README.md"))
	e := cluster.New(t)
	repo := newAptRepo(t)
	repo.publish(dist.Package(t, dist.Agent, "deb"), dist.Package(t, dist.Ctl, "deb"))

	const node = "node-1"
	if err := cluster.CreateNode(e.Ctx, e.Client, node, map[string]string{cluster.LabelTestEnv: e.ID}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Client.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	hosts := map[string]*host{"admin": bootHost(t, e, e.ID+"-admin"), node: bootHost(t, e, node)}
	for _, h := range hosts {
		writeFile(t, filepath.Join(h.Dir, "etc/apt/sources.list"), nil, 0o644) // no Debian mirror here
	}

	// The admin's machine: its kubeconfig (cluster-admin), and root's SSH
	// to the node as node-1.
	admin := hosts["admin"]
	cfg, err := clientcmd.LoadFromFile(e.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := clientcmdapi.FlattenConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(admin.Dir, "root/.kube"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := clientcmd.WriteToFile(*cfg, filepath.Join(admin.Dir, "root/.kube/config")); err != nil {
		t.Fatal(err)
	}
	pub := sshKeyPair(t, filepath.Join(admin.Dir, "root/.ssh/id_ed25519"))
	port := freePort(t)
	if err := hosts[node].EnableSSH(e.Ctx, port, pub); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(admin.Dir, "root/.ssh/config"),
		fmt.Appendf(nil, "Host %s\n  HostName 127.0.0.1\n  Port %d\n  StrictHostKeyChecking accept-new\n", node, port), 0o600)

	env := []string{"env", "HOME=/root", "REPO=" + strings.TrimSuffix(repo.URL, "/apt")}
	for _, s := range steps {
		h, ok := hosts[s.where]
		if !ok {
			t.Fatalf("README.md:%d: a command for %q; the quickstart runs on admin and %s", s.line, s.where, node)
		}
		ctx, cancel := context.WithTimeout(e.Ctx, 3*cluster.DefaultTimeout)
		out, err := h.Exec(ctx, append(env, "sh", "-ec", "cd && "+s.command)...)
		cancel()
		t.Logf("README.md:%d: %s# %s\n%s", s.line, s.where, s.command, out)
		if err != nil {
			t.Fatalf("README.md:%d: %s# %s: %v\n%s", s.line, s.where, s.command, err, out)
		}
		for _, p := range s.prints {
			if !printed(p, out) {
				t.Errorf("README.md:%d: %s# %s printed no line like %q:\n%s", s.line, s.where, s.command, p, out)
			}
		}
	}
	if nodeUnschedulable(t, e, node) {
		t.Errorf("%s left cordoned after the quickstart", node)
	}
}

// The quickstart's reader and matcher, on text of their own.
func TestQuickstartReader(t *testing.T) {
	for _, c := range []struct {
		documented, out string
		want            bool
	}{
		{"wrote node-1.kubeconfig for node node-1 (token expires <time>)", "wrote node-1.kubeconfig for node node-1 (token expires 2027-02-23T07:00:00Z)\n", true},
		{"wrote node-1.kubeconfig for node node-1 (token expires <time>)", "wrote node-2.kubeconfig for node node-2 (token expires x)\n", false},
		{"<...>node-1<...>InMaintenance<...>", "GROUP  NODE    STATE\ndefault node-1  InMaintenance  3s\n", true},
		{"<...>node-1<...>InMaintenance<...>", "default node-1  Waiting\n", false},
		{"<...>", "", true},
	} {
		if got := printed(c.documented, c.out); got != c.want {
			t.Errorf("printed(%q, %q) = %v, want %v", c.documented, c.out, got, c.want)
		}
	}
}
