package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/manifests"
	"github.com/kustodian/kustodian/test/buildbin"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/dist"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// Three Debian hosts with sshd, in an inventory that lists the control
// plane first: the role installs the package and each node's own
// kubeconfig (and shows why when it cannot mint one, and refuses a
// configuration with a typo); rollout.yml rolls
// examples/upgrade-package.sh (which needs a reboot) across the workers
// (--limit workers), the first worker as the canary, one node at a time;
// --check and a relative script from another directory; a rollout with
// fewer forks than nodes; then a newer package build installed while idle
// keeps the configuration, and a purge leaves nothing running.
func TestAnsibleRollout(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	nodecreds.Install(e, e.Namespace) // the cluster side, once: kustodian-ctl install
	dir := t.TempDir()
	key := filepath.Join(dir, "id_ed25519")
	pub := sshKeyPair(t, key)
	v1 := buildDeb(t, dir, "kustodian-example", "1.0")
	v2 := buildDeb(t, dir, "kustodian-example", "2.0")

	var hosts []*host
	var inventory strings.Builder
	for i := range 3 {
		// The control plane first, as inventories have it.
		inventory.WriteString([]string{"[control_plane]\n", "[workers]\n", ""}[i])
		h := newBareHost(t, e, i)
		t.Cleanup(h.KeepBooting(t.Logf)) // the example's reboots
		hosts = append(hosts, h)
		port := freePort(t)
		if err := h.EnableSSH(e.Ctx, port, pub); err != nil {
			t.Fatal(err)
		}
		copyFile(t, v1, filepath.Join(h.Dir, "root/example.deb"), 0o644)
		h.run("dpkg", "--install", "/root/example.deb")
		fmt.Fprintf(&inventory, "%s ansible_host=127.0.0.1 ansible_port=%d ansible_user=root ansible_ssh_private_key_file=%s\n", h.Name, port, key)
	}
	fmt.Fprintf(&inventory, `
[nodes:children]
control_plane
workers

[nodes:vars]
kustodian_package_file=%s
kustodian_ctl=%s
kustodian_admin_kubeconfig=%s
kustodian_namespace=%s
kustodian_config={"queue": {"heartbeat": "1s"}, "drain": {"evictErrorRetryDelay": "300ms"}}
`, dist.Package(t, dist.Agent, "deb"), buildbin.Ctl(t), e.Kubeconfig, e.Namespace)
	inv := filepath.Join(dir, "inventory")
	if err := os.WriteFile(inv, []byte(inventory.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	// The role. A node whose inventory name is not its Node's: the mint's
	// refusal is shown, with its reason.
	out, err := runPlaybook(t, inv, "site.yml", "--limit", hosts[0].Name, "-e", "kustodian_node_name=no-such-node", "-e", "kustodian_rounds=1")
	if err == nil || !strings.Contains(out, `mint the kubeconfig: kustodian-ctl: node "no-such-node" not found`) || strings.Contains(out, "no_log") {
		t.Errorf("site.yml with a wrong node name: %v; the output does not show why the mint failed", err)
	}
	playbook(t, inv, "site.yml")
	configs := map[string]string{}
	for _, h := range hosts {
		h.pathUnitReady()
		st, err := os.Stat(filepath.Join(h.Dir, "etc/kustodian/kubeconfig"))
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Fatalf("%s: kubeconfig %v (mode %v), want 0600", h.Name, err, st.Mode().Perm())
		}
		b, err := os.ReadFile(filepath.Join(h.Dir, "etc/kustodian/config.yaml"))
		if err != nil || !strings.Contains(string(b), "namespace: "+e.Namespace) || !strings.Contains(string(b), "heartbeat: 1s") {
			t.Fatalf("%s: config.yaml %v:\n%s", h.Name, err, b)
		}
		configs[h.Name] = string(b)
	}
	// A typo in kustodian_config: kustodian config check refuses it before
	// it replaces the node's configuration.
	out, err = runPlaybook(t, inv, "site.yml", "--limit", hosts[0].Name, "--tags", "config", "-e", `{"kustodian_config": {"drain": {"timout": "5m"}}}`, "-e", "kustodian_rounds=1")
	if err == nil || !strings.Contains(out, `unknown key "drain.timout"; did you mean drain.timeout?`) {
		t.Errorf("site.yml with a typo in kustodian_config: %v; the output does not show the check's refusal", err)
	}
	if b, _ := os.ReadFile(filepath.Join(hosts[0].Dir, "etc/kustodian/config.yaml")); string(b) != configs[hosts[0].Name] {
		t.Errorf("%s: a configuration with a typo replaced the good one:\n%s", hosts[0].Name, b)
	}

	// --check, and a script named relative to the directory
	// ansible-playbook runs in (not the playbook's).
	failing := filepath.Join(dir, "failing.sh")
	if err := os.WriteFile(failing, []byte("#!/bin/sh\necho 'E: the mirror is unreachable' >&2\nexit 4\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err = runPlaybookIn(t, dir, inv, "rollout.yml", "--check", "-e", "rollout_script=failing.sh", "-e", "rollout_id=checked")
	want := fmt.Sprintf("check mode, nothing is done: job checked runs %s from /var/lib/kustodian/rollout/checked on 3 nodes: canary %s alone, then %s, %s",
		failing, hosts[1].Name, hosts[0].Name, hosts[2].Name)
	if err != nil || !strings.Contains(out, want) {
		t.Errorf("rollout.yml --check: %v; the output lacks %q", err, want)
	}
	for _, h := range hosts {
		if h.exists("/var/lib/kustodian/jobs/checked.json") || h.exists("/var/lib/kustodian/rollout/checked") {
			t.Errorf("%s: rollout.yml --check submitted or copied something", h.Name)
		}
	}
	out, err = runPlaybookIn(t, dir, inv, "rollout.yml", "-e", "rollout_script=./nope.sh")
	if err == nil || !strings.Contains(out, "not a file on the controller: "+filepath.Join(dir, "nope.sh")) {
		t.Errorf("rollout.yml with a missing relative script: %v; the output does not name the path tried", err)
	}

	// The rollout.
	tl := recordTimeline(t, e)
	const id = "upgrade-example"
	out = playbook(t, inv, "rollout.yml", "--limit", "workers", "-e", "rollout_script="+filepath.Join(dist.RepoRoot(t), "examples", "upgrade-package.sh"),
		"-e", "rollout_id="+id, "-e", fmt.Sprintf(`{"rollout_files": [%q], "rollout_args": ["/var/lib/kustodian/rollout/%s/%s"]}`, v2, id, filepath.Base(v2)))
	if !strings.Contains(out, "failed=0") {
		t.Errorf("the rollout reported failures")
	}
	for _, want := range []string{"canary " + hosts[1].Name + " alone, then " + hosts[2].Name + ",", hosts[1].Name + ": succeeded (job " + id, hosts[2].Name + ": succeeded (job " + id} {
		if !strings.Contains(out, want) {
			t.Errorf("the rollout's output lacks %q", want)
		}
	}
	if strings.Contains(out, "FAILED - RETRYING") {
		t.Errorf("the rollout printed retry lines while following its jobs")
	}
	// The control-plane node is not in the run (--limit workers).
	if got := strings.TrimSpace(hosts[0].run("dpkg-query", "--show", "--showformat", "${Version}", "kustodian-example")); got != "1.0" || hosts[0].exists("/var/lib/kustodian/jobs/"+id+".json") {
		t.Errorf("%s (control plane, not in --limit workers): kustodian-example %s, or its job exists", hosts[0].Name, got)
	}
	var names []string
	for _, h := range hosts[1:] {
		names = append(names, h.Name)
		if got := strings.TrimSpace(h.run("dpkg-query", "--show", "--showformat", "${Version}", "kustodian-example")); got != "2.0" {
			t.Errorf("%s: kustodian-example %s, want 2.0", h.Name, got)
		}
		if job := h.run("cat", "/var/lib/kustodian/jobs/"+id+".json"); !strings.Contains(job, `"runs": 2`) && !strings.Contains(job, `"runs":2`) {
			t.Errorf("%s: the job did not run twice (before and after its reboot): %s", h.Name, job)
		}
		if nodeUnschedulable(t, e, h.Name) {
			t.Errorf("%s left cordoned", h.Name)
		}
	}
	e.Eventually("every node Idle", cluster.DefaultTimeout, func(context.Context) error { return tl.AllIdle(names) })
	if err := tl.CheckExclusive(1); err != nil {
		t.Error(err)
	}
	// The canary (the first worker) was done before any other node asked.
	var canaryDone, othersFirst time.Time
	for _, tr := range tl.Transitions() {
		switch {
		case tr.Node == hosts[1].Name && tr.State == lock.Idle:
			canaryDone = tr.At
		case tr.Node != hosts[1].Name && othersFirst.IsZero() && tr.State != lock.Idle:
			othersFirst = tr.At
		}
	}
	if canaryDone.IsZero() || othersFirst.IsZero() || !canaryDone.Before(othersFirst) {
		t.Errorf("canary done at %v, another node first seen at %v:\n%s", canaryDone, othersFirst, tl)
	}
	t.Logf("timeline:\n%s", tl)

	rolloutWithRebootsDuringPolls(t, e, hosts, inv, dir)
	if err := tl.CheckExclusive(1); err != nil {
		t.Error(err)
	}

	// One fork for the two nodes after the canary: the plan says so, the
	// nodes are followed in turn, and the rollout ends as it would with
	// more.
	quick := filepath.Join(dir, "quick.sh")
	if err := os.WriteFile(quick, []byte("#!/bin/sh\necho patched\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out = playbook(t, inv, "rollout.yml", "-f", "1", "-e", "rollout_script="+quick, "-e", "rollout_id=one-fork")
	if !strings.Contains(out, "Only 1 forks (-f) for 2 nodes after the canary") {
		t.Errorf("the plan does not say that the forks are fewer than the nodes")
	}
	for _, h := range hosts {
		if !strings.Contains(out, h.Name+": succeeded (job one-fork (run 1): succeeded, exit 0") {
			t.Errorf("%s: the report of the rollout with one fork does not say it succeeded", h.Name)
		}
	}
	if err := tl.CheckExclusive(1); err != nil {
		t.Error(err)
	}

	// A newer build, while idle, from Kustodian's signed repository this
	// time (the role's other way in: it adds the repository and its key):
	// upgraded, configuration kept.
	newer, version := newerBuild(t, dist.Package(t, dist.Agent, "deb"), dir)
	repo := newAptRepo(t)
	repo.publish(newer)
	for _, h := range hosts {
		// The repository is the hosts' only source: the test needs no mirror.
		writeFile(t, filepath.Join(h.Dir, "etc/apt/sources.list"), nil, 0o644)
	}
	playbook(t, inv, "site.yml", "-e", "kustodian_package_file=", "-e", "kustodian_package_state=latest",
		"-e", "kustodian_repo_url="+strings.TrimSuffix(repo.URL, "/apt"), "-e", "kustodian_repo_key="+filepath.Join(repo.dir, "kustodian.asc"))
	for _, h := range hosts {
		if got := strings.TrimSpace(h.run("dpkg-query", "--show", "--showformat", "${Version}", "kustodian")); got != version {
			t.Errorf("%s: kustodian %s after the upgrade, want %s", h.Name, got, version)
		}
		if b, _ := os.ReadFile(filepath.Join(h.Dir, "etc/kustodian/config.yaml")); string(b) != configs[h.Name] {
			t.Errorf("%s: the upgrade changed config.yaml:\n%s", h.Name, b)
		}
		h.pathUnitReady()
	}

	// Tokens: renew-kubeconfigs.yml, on a schedule, renews only those that
	// expire within kustodian_renew_before_days.
	kubeconfigs := map[string]string{}
	readKubeconfig := func(h *host) string {
		b, err := os.ReadFile(filepath.Join(h.Dir, "etc/kustodian/kubeconfig"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, h := range hosts {
		kubeconfigs[h.Name] = readKubeconfig(h)
	}
	playbook(t, inv, "renew-kubeconfigs.yml")
	for _, h := range hosts {
		if readKubeconfig(h) != kubeconfigs[h.Name] {
			t.Errorf("%s: a token with 90 days left renewed (kustodian_renew_before_days 30)", h.Name)
		}
	}
	playbook(t, inv, "renew-kubeconfigs.yml", "-e", "kustodian_renew_before_days=91", "-e", "kustodian_token_duration=2200h")
	var c struct {
		Node             string `json:"node"`
		ExpiresInSeconds int64  `json:"expiresInSeconds"`
	}
	for _, h := range hosts {
		if readKubeconfig(h) == kubeconfigs[h.Name] {
			t.Errorf("%s: a token within kustodian_renew_before_days not renewed", h.Name)
		}
		c.Node = ""
		if out := h.run("kustodian", "credentials", "-o", "json"); json.Unmarshal([]byte(out), &c) != nil || c.Node != h.Name || c.ExpiresInSeconds < 91*24*3600 {
			t.Errorf("%s: kustodian credentials after the renewal: %s", h.Name, out)
		}
	}
	// A token of the agents' ServiceAccount bound to no Node, far from its
	// expiry (200 days, beyond kustodian_renew_before_days): kustodian
	// credentials exits 2, and that alone makes the role mint a bound one.
	far := int64(200 * 24 * 3600)
	unbound, err := e.Client.CoreV1().ServiceAccounts(e.Namespace).CreateToken(e.Ctx, manifests.AgentServiceAccount,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{ExpirationSeconds: &far}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	h0 := hosts[0]
	withUnbound := regexp.MustCompile(`(?m)^(\s*token:\s*).*$`).ReplaceAllString(readKubeconfig(h0), "${1}"+unbound.Status.Token)
	if err := os.WriteFile(filepath.Join(h0.Dir, "etc/kustodian/kubeconfig"), []byte(withUnbound), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := h0.Exec(e.Ctx, "kustodian", "credentials"); !strings.Contains(out, "a token not bound to a Node") || err == nil {
		t.Fatalf("%s: kustodian credentials on an unbound token: %v\n%s", h0.Name, err, out)
	}
	out, _ = h0.Exec(e.Ctx, "kustodian", "credentials", "-o", "json")
	if c.ExpiresInSeconds = 0; json.Unmarshal([]byte(out), &c) != nil || c.ExpiresInSeconds < 31*24*3600 {
		t.Fatalf("%s: the unbound token expires too soon for the test to judge exit 2 alone: %s", h0.Name, out)
	}
	playbook(t, inv, "renew-kubeconfigs.yml", "--limit", h0.Name)
	c.Node = ""
	if out := h0.run("kustodian", "credentials", "-o", "json"); json.Unmarshal([]byte(out), &c) != nil || c.Node != h0.Name {
		t.Errorf("%s: the role left a token bound to no Node: %s", h0.Name, out)
	}

	// A script that fails: its node stays Failed with the lock, and the
	// playbook stops for every node at once (the others are blocked behind
	// it), reporting the failure, instead of waiting for rollout_timeout.
	out, err = runPlaybook(t, inv, "rollout.yml", "-e", "rollout_script="+failing, "-e", "rollout_id=failing", "-e", "rollout_canary=false", "-e", "rollout_timeout=900")
	if err == nil {
		t.Fatal("the failing rollout succeeded")
	}
	for _, want := range []string{"job failing (run 1): failed, exit 4: E: the mirror is unreachable", "blocked: ", "holds lock-default-0 and Failed", "Failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("the failing rollout's output lacks %q", want)
		}
	}

	// Purge: nothing left running or installed.
	for _, h := range hosts {
		h.run("env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "purge", "-y", "-q", "kustodian")
		// (systemd may still list a stopped unit as "not-found inactive dead".)
		if units := h.run("systemctl", "list-units", "--no-legend", "--state=active,activating,deactivating,reloading,failed", "kustodian*"); strings.TrimSpace(units) != "" {
			t.Errorf("%s: units left after the purge:\n%s", h.Name, units)
		}
		if procs, _ := h.Exec(e.Ctx, "pgrep", "-a", "kustodian"); strings.TrimSpace(procs) != "" {
			t.Errorf("%s: processes left after the purge:\n%s", h.Name, procs)
		}
		for _, path := range []string{"etc/kustodian", "usr/bin/kustodian", "var/lib/kustodian"} {
			if h.exists("/" + path) {
				t.Errorf("%s: /%s left after the purge", h.Name, path)
			}
		}
	}
}

// pollWrapper stands in front of the real kustodian on the hosts for
// rolloutWithRebootsDuringPolls: while rollout.yml follows the job
// reboot-during-polls (kustodian run --id ... --wait), a marker exists, so
// the job can time its reboot to land in a follow. Each follow logs its
// start and end with the boot's ID: a start without an end is a follow
// that a reboot cut.
const pollWrapper = `#!/bin/sh
case " $* " in
*" --wait "*)
	if [ "$1 $2 $3" = "run --id reboot-during-polls" ]; then
		boot=$(cat /proc/sys/kernel/random/boot_id)
		mkdir -p /run/kustodian-test /var/lib/kustodian-test
		echo "start $boot $$" >> /var/lib/kustodian-test/polls
		touch /run/kustodian-test/poll
		/usr/bin/kustodian "$@"
		rc=$?
		rm -f /run/kustodian-test/poll
		echo "end $boot $$" >> /var/lib/kustodian-test/polls
		exit $rc
	fi
	;;
esac
exec /usr/bin/kustodian "$@"
`

// rebootsDuringPolls is the job's script: it needs two reboots, and asks
// for each one only while rollout.yml follows it on its node.
const rebootsDuringPolls = `#!/bin/sh
set -eu
count=/var/lib/kustodian-test/reboots
n=$(cat $count 2>/dev/null || echo 0)
if [ "$n" -ge 2 ]; then
	echo "rebooted $n times; done"
	exit 0
fi
i=0
until [ -e /run/kustodian-test/poll ]; do
	i=$((i + 1))
	if [ $i -gt 1200 ]; then echo "no poll came in 120 s" >&2; exit 3; fi
	sleep 0.1
done
echo $((n + 1)) > $count
touch /run/reboot-required
echo "reboot $((n + 1)), while a poll runs"
`

// A job whose reboots land while rollout.yml is following it, for
// certain: every node reboots twice, each time in the middle of a follow.
// The rollout must wait for the node to come back and follow again, and
// end with every job done.
func rolloutWithRebootsDuringPolls(t *testing.T, e *cluster.Env, hosts []*host, inv, dir string) {
	t.Helper()
	for _, h := range hosts {
		if err := os.WriteFile(filepath.Join(h.Dir, "usr/local/bin/kustodian"), []byte(pollWrapper), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	defer func() {
		for _, h := range hosts {
			_ = os.Remove(filepath.Join(h.Dir, "usr/local/bin/kustodian"))
		}
	}()
	script := filepath.Join(dir, "reboots-during-polls.sh")
	if err := os.WriteFile(script, []byte(rebootsDuringPolls), 0o755); err != nil {
		t.Fatal(err)
	}
	const id = "reboot-during-polls"
	defer func() {
		if t.Failed() {
			for _, h := range hosts {
				polls, _ := h.Exec(e.Ctx, "cat", "/var/lib/kustodian-test/polls")
				t.Logf("%s: the polls:\n%s\nthe job's journal:\n%s", h.Name, polls, h.Journal(e.Ctx, "kustodian-job-"+id+"-*"))
			}
		}
	}()
	out := playbook(t, inv, "rollout.yml", "-e", "rollout_script="+script, "-e", "rollout_id="+id, "-e", "rollout_timeout=900")
	for _, h := range hosts {
		// The playbook saw each reboot cut a round short, and carried on.
		cut := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(h.Name) + `: round \d+ cut short: `)
		if n := len(cut.FindAllString(out, -1)); n < 2 {
			t.Errorf("%s: %d rounds cut short in the playbook's output, want one per reboot (2)", h.Name, n)
		}
		if recap := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(h.Name) + `\s*:.*\bfailed=0\b`); !recap.MatchString(out) {
			t.Errorf("%s: the rollout's recap shows failures", h.Name)
		}
		if job := h.run("cat", "/var/lib/kustodian/jobs/"+id+".json"); !strings.Contains(job, `"runs": 3`) && !strings.Contains(job, `"runs":3`) {
			t.Errorf("%s: the job did not run three times (two reboots): %s", h.Name, job)
		}
		polls := h.run("cat", "/var/lib/kustodian-test/polls")
		if cut := cutPolls(polls); cut != 2 {
			t.Errorf("%s: %d polls were cut by a reboot, want 2 (one per reboot):\n%s", h.Name, cut, polls)
		}
		if nodeUnschedulable(t, e, h.Name) {
			t.Errorf("%s left cordoned", h.Name)
		}
	}
}

// cutPolls counts the polls that started and never ended: each "start
// BOOT PID" line without its "end BOOT PID".
func cutPolls(log string) int {
	open := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 {
			continue
		}
		switch f[0] {
		case "start":
			open[f[1]+" "+f[2]] = true
		case "end":
			delete(open, f[1]+" "+f[2])
		}
	}
	return len(open)
}
