package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
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
// (the prompt's name: build, admin, node-1, node-2), the command, and the
// lines it is documented to print (<...> stands for anything).
type quickstartStep struct {
	where, command string
	prints         []string
	line           int // in README.md
}

var (
	quickstartPrompt = regexp.MustCompile(`^([a-z0-9-]+)[#$] (.+)$`)
	// assignment is a step that sets a shell variable for the steps after
	// it in the same shell (REPO=...).
	assignment = regexp.MustCompile(`^[A-Z_]+=\S+$`)
	// tableRow is a row of the table of apt commands and their dnf
	// equivalents: | step | `apt ...` | `dnf ...` |
	tableRow = regexp.MustCompile("^\\| ([a-z ]+) \\| `(.+)` \\| `(.+)` \\|$")
)

// quickstart is what the README's section "Quickstart" holds: the commands
// of its console blocks (every line with a prompt, and the lines after it
// up to the next prompt as what it prints), and its table of apt commands
// with their dnf equivalents.
type quickstart struct {
	steps    []quickstartStep
	apt, dnf map[string]string // a row's step: its command
}

func readQuickstart(t *testing.T, readme string) quickstart {
	t.Helper()
	f, err := os.Open(readme)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	q := quickstart{apt: map[string]string{}, dnf: map[string]string{}}
	var inSection, inConsole bool
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			inSection = line == "## Quickstart"
		case !inSection:
		case line == "```console":
			inConsole = true
		case strings.HasPrefix(line, "```"):
			inConsole = false
		case !inConsole && tableRow.MatchString(line):
			m := tableRow.FindStringSubmatch(line)
			q.apt[m[1]], q.dnf[m[1]] = m[2], m[3]
		case !inConsole:
		case quickstartPrompt.MatchString(line):
			m := quickstartPrompt.FindStringSubmatch(line)
			q.steps = append(q.steps, quickstartStep{where: m[1], command: m[2], line: n})
		case len(q.steps) > 0 && strings.TrimSpace(line) != "":
			last := &q.steps[len(q.steps)-1]
			last.prints = append(last.prints, line)
		}
	}
	if len(q.steps) < 15 || len(q.apt) != 3 {
		t.Fatalf("README.md: %d commands in the quickstart's console blocks and %d rows of apt and dnf commands; the section, its prompts (build$, admin#, node-1#) or its table moved", len(q.steps), len(q.apt))
	}
	return q
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

// The README's quickstart, run as written: an admin's machine and two nodes
// (booted systemd hosts with no Debian mirror), the local control plane as
// the cluster. The quick trial installs the packages copied from dist/ on
// admin and node-1; the fleet path serves the signed repository (made from
// dist/ as make repo makes it) with the README's own command, on a free
// port instead of 8080 (build-host is this machine: the hosts share its
// network), and installs node-2 from it. Each command runs in a root shell
// of its host with the variables set before it in that shell, and must
// succeed and print what the README shows. The build step is checked with
// make -n (make test has built dist/ already). The dnf column of the table
// is checked where a Debian host can: its package is in dist/, and the
// .repo file its command writes names the served repository's rpm tree and
// key.
func TestQuickstartFromTheREADME(t *testing.T) {
	t.Parallel()
	root := dist.RepoRoot(t)
	q := readQuickstart(t, filepath.Join(root, "README.md"))
	e := cluster.New(t)
	repo := newAptRepo(t)
	repo.publish(dist.Package(t, dist.Agent, "deb"), dist.Package(t, dist.Ctl, "deb"), dist.Package(t, dist.Agent, "rpm"), dist.Package(t, dist.Ctl, "rpm"))

	nodes := []string{"node-1", "node-2"}
	for _, node := range nodes {
		if err := cluster.CreateNode(e.Ctx, e.Client, node, map[string]string{cluster.LabelTestEnv: e.ID}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Client.CoreV1().Nodes().Delete(context.Background(), node, metav1.DeleteOptions{}) })
	}
	hosts := map[string]*host{"admin": bootHost(t, e, e.ID+"-admin")}
	for _, node := range nodes {
		hosts[node] = bootHost(t, e, node)
	}
	for _, h := range hosts {
		writeFile(t, filepath.Join(h.Dir, "etc/apt/sources.list"), nil, 0o644) // no Debian mirror here
	}
	// The quick trial's packages, copied from dist/ as the README says.
	admin := hosts["admin"]
	ctlDeb, agentDeb := dist.Package(t, dist.Ctl, "deb"), dist.Package(t, dist.Agent, "deb")
	copyFile(t, ctlDeb, filepath.Join(admin.Dir, "root", filepath.Base(ctlDeb)), 0o644)
	copyFile(t, agentDeb, filepath.Join(hosts["node-1"].Dir, "root", filepath.Base(agentDeb)), 0o644)

	// The admin's machine: its kubeconfig (cluster-admin), and root's SSH
	// to each node by its name.
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
	var sshConfig strings.Builder
	for _, node := range nodes {
		port := freePort(t)
		if err := hosts[node].EnableSSH(e.Ctx, port, pub); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sshConfig, "Host %s\n  HostName 127.0.0.1\n  Port %d\n  StrictHostKeyChecking accept-new\n", node, port)
	}
	writeFile(t, filepath.Join(admin.Dir, "root/.ssh/config"), []byte(sshConfig.String()), 0o600)

	served := ""                 // build-host:8080 as served here
	set := map[string][]string{} // each shell's variables
	for _, s := range q.steps {
		if s.where == "build" {
			if addr := quickstartBuildStep(t, s, root, repo.dir); addr != "" {
				served = addr
			}
			continue
		}
		h, ok := hosts[s.where]
		if !ok {
			t.Fatalf("README.md:%d: a command for %q; the quickstart runs on build, admin, node-1 and node-2", s.line, s.where)
		}
		command := s.command
		if strings.Contains(command, "build-host:8080") {
			if served == "" {
				t.Fatalf("README.md:%d: build-host:8080 before the build step that serves it", s.line)
			}
			command = strings.ReplaceAll(command, "build-host:8080", served)
		}
		script := strings.Join(append(append([]string{"cd"}, set[s.where]...), command), " && ")
		if assignment.MatchString(command) {
			set[s.where] = append(set[s.where], command)
		}
		ctx, cancel := context.WithTimeout(e.Ctx, 3*cluster.DefaultTimeout)
		out, err := h.Exec(ctx, "env", "HOME=/root", "sh", "-ec", script)
		cancel()
		t.Logf("README.md:%d: %s# %s\n%s", s.line, s.where, command, out)
		if err != nil {
			t.Fatalf("README.md:%d: %s# %s: %v\n%s", s.line, s.where, command, err, out)
		}
		for _, p := range s.prints {
			if !printed(p, out) {
				t.Errorf("README.md:%d: %s# %s printed no line like %q:\n%s", s.line, s.where, command, p, out)
			}
		}
	}
	for _, node := range nodes {
		if nodeUnschedulable(t, e, node) {
			t.Errorf("%s left cordoned after the quickstart", node)
		}
	}
	if served == "" {
		t.Fatal("README.md: the quickstart never serves dist/repo")
	}
	quickstartTable(t, q, root, hosts["node-2"], served, set["node-2"])
}

// quickstartBuildStep checks a build$ step: make's targets exist (make -n;
// dist/ is built already), and the command that serves dist/repo runs,
// serving the repository made here on a free port. It returns what
// build-host:8080 stands for once served, else "".
func quickstartBuildStep(t *testing.T, s quickstartStep, root, repoDir string) string {
	t.Helper()
	args := strings.Fields(s.command)
	switch {
	case args[0] == "make":
		out, err := exec.Command("make", append([]string{"-n", "-C", root}, args[1:]...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("README.md:%d: build$ %s: make -n: %v\n%s", s.line, s.command, err, out)
		}
		return ""
	case strings.Contains(s.command, " 8080 ") && strings.HasSuffix(s.command, " dist/repo"):
		port := fmt.Sprint(freePort(t))
		command := strings.Replace(strings.TrimSuffix(s.command, "dist/repo")+repoDir, " 8080 ", " "+port+" ", 1)
		cmd := exec.Command("sh", "-c", "exec "+command)
		if err := cmd.Start(); err != nil {
			t.Fatalf("README.md:%d: build$ %s: %v", s.line, command, err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		served := "127.0.0.1:" + port
		waitHTTP(t, "http://"+served+"/kustodian.asc")
		return served
	}
	t.Fatalf("README.md:%d: build$ %s: the test knows make and serving dist/repo on 8080; say here how to check this step", s.line, s.command)
	return ""
}

// quickstartTable checks the table of apt commands and their dnf
// equivalents: every apt command is one the quickstart runs, the dnf
// column's local package is in dist/, and the .repo file its repository
// command writes (run on a Debian host, in a shell with the quickstart's
// variables) names the served repository's rpm tree and key.
func quickstartTable(t *testing.T, q quickstart, root string, h *host, served string, set []string) {
	t.Helper()
	for step, apt := range q.apt {
		found := false
		for _, s := range q.steps {
			found = found || strings.Contains(s.command, apt)
		}
		if !found {
			t.Errorf("README.md: the table's apt command for %q is not one the quickstart runs: %s", step, apt)
		}
	}
	words := strings.Fields(q.dnf["a local package"])
	local := strings.TrimPrefix(words[len(words)-1], "./")
	if m, _ := filepath.Glob(filepath.Join(root, "dist", local)); len(m) != 1 {
		t.Errorf("README.md: the dnf column installs %s: dist/ has %v", local, m)
	}
	script := strings.Join(append(append([]string{"cd", "mkdir -p /etc/yum.repos.d"}, set...), q.dnf["the repository"]), " && ")
	if out, err := h.Exec(h.e.Ctx, "sh", "-ec", script); err != nil {
		t.Fatalf("README.md: the dnf column's repository command: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(h.Dir, "etc/yum.repos.d/kustodian.repo"))
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"baseurl", "gpgkey"} {
		m := regexp.MustCompile(`(?m)^` + key + `=(\S+)$`).FindStringSubmatch(string(b))
		if m == nil {
			t.Errorf("kustodian.repo has no %s:\n%s", key, b)
			continue
		}
		if !strings.Contains(m[1], served) {
			t.Errorf("kustodian.repo's %s %s is not the served repository (%s)", key, m[1], served)
			continue
		}
		url := m[1]
		if key == "baseurl" {
			url += "/repodata/repomd.xml"
		}
		waitHTTP(t, url)
	}
}

// waitHTTP waits until url answers 200.
func waitHTTP(t *testing.T, url string) {
	t.Helper()
	err := cluster.Eventually(context.Background(), cluster.DefaultTimeout, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s", resp.Status)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// The quickstart's reader and matcher, on text of their own.
func TestQuickstartReader(t *testing.T) {
	t.Parallel()
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
