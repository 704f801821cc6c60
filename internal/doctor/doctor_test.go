package doctor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func find(t *testing.T, fs []Finding, check string) Finding {
	t.Helper()
	for _, f := range fs {
		if f.Check == check {
			return f
		}
	}
	t.Fatalf("no finding %s", check)
	return Finding{}
}

// healthy is a host where every check passes.
func healthy() Facts {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	return Facts{Now: now, Node: "node-1",
		InhibitDelayMax: 90 * time.Second, Inhibitors: []Inhibitor{{What: "shutdown", Who: "kubelet", Mode: "delay"}},
		KubeletConfig: "/var/lib/kubelet/config.yaml", ShutdownGracePeriod: 60 * time.Second, ShutdownGracePeriodCriticalPods: 20 * time.Second,
		PathUnitFileState: "enabled", PathUnitActiveState: "active",
		Kubeconfig: "/etc/kustodian/kubeconfig", KubeconfigOK: true, TokenExpires: now.Add(60 * 24 * time.Hour),
		KuredDaemonSet: "kube-system/kured", KuredFound: true, KuredArgs: []string{"/usr/bin/kured", "--reboot-sentinel-command=/usr/bin/kustodian reboot-gate"},
		KubeletKubeconfig: "/etc/kubernetes/kubelet.conf", KubeletUser: "system:node:node-1"}
}

func TestHealthyHost(t *testing.T) {
	fs := Run(healthy())
	for _, f := range fs {
		if f.Status != OK || f.Fix != "" {
			t.Errorf("%s: %s %q (fix %q)", f.Check, f.Status, f.Message, f.Fix)
		}
	}
	if ExitCode(fs) != 0 {
		t.Errorf("exit %d", ExitCode(fs))
	}
}

func TestFindings(t *testing.T) {
	cases := []struct {
		name    string
		change  func(*Facts)
		check   string
		status  Status
		message string // a part of it
		fix     string // a part of it
		exit    int
	}{
		{"unattended-upgrades' 30 s wins over the kubelet's drop-in", func(f *Facts) {
			f.InhibitDelayMax = 30 * time.Second
			f.DropIns = []DropIn{{"/etc/systemd/logind.conf.d/99-kubelet.conf", 60 * time.Second}, {"/usr/lib/systemd/logind.conf.d/unattended-upgrades-logind-maxdelay.conf", 30 * time.Second}}
		}, CheckInhibitDelay, Fail,
			"logind's InhibitDelayMaxSec 30s (set by /usr/lib/systemd/logind.conf.d/unattended-upgrades-logind-maxdelay.conf: unattended-upgrades' override, which sorts after 99-kubelet.conf and wins over it) is shorter than the kubelet's shutdownGracePeriod 1m0s",
			`write /etc/systemd/logind.conf.d/zz-kustodian.conf with "[Login]\nInhibitDelayMaxSec=60"`, 2},
		{"a drop-in that sorts after ours", func(f *Facts) {
			f.InhibitDelayMax = 5 * time.Second
			f.DropIns = []DropIn{{"/etc/systemd/logind.conf.d/zzz-site.conf", 5 * time.Second}}
		}, CheckInhibitDelay, Fail, "(set by /etc/systemd/logind.conf.d/zzz-site.conf)", "/etc/systemd/logind.conf.d/zzz-site.zz-kustodian.conf", 2},
		{"a drop-in whose name sorts after every z", func(f *Facts) {
			f.InhibitDelayMax = 5 * time.Second
			f.DropIns = []DropIn{{"/etc/systemd/logind.conf.d/~local.conf", 5 * time.Second}}
		}, CheckInhibitDelay, Fail, "(set by /etc/systemd/logind.conf.d/~local.conf)", "/etc/systemd/logind.conf.d/~local.zz-kustodian.conf", 2},
		{"logind not restarted since the fix", func(f *Facts) {
			f.InhibitDelayMax = 30 * time.Second
			f.DropIns = []DropIn{{"/usr/lib/systemd/logind.conf.d/unattended-upgrades-logind-maxdelay.conf", 30 * time.Second}, {"/etc/systemd/logind.conf.d/zz-kustodian.conf", 60 * time.Second}}
		}, CheckInhibitDelay, Fail, "though its files say 1m0s (/etc/systemd/logind.conf.d/zz-kustodian.conf): logind was not restarted since", "systemctl restart systemd-logind", 2},
		{"graceful shutdown off", func(f *Facts) { f.ShutdownGracePeriod = 0 }, CheckInhibitDelay, Warn, "graceful node shutdown is off", "set shutdownGracePeriod", 1},
		{"no kubelet config", func(f *Facts) { f.KubeletConfig = "" }, CheckInhibitDelay, Warn, "no kubelet configuration file found", "--kubelet-config", 1},
		{"logind unreachable", func(f *Facts) { f.LogindErr = errors.New("no system D-Bus") }, CheckInhibitDelay, Unknown, "no system D-Bus", "", 1},
		{"no kubelet inhibitor", func(f *Facts) { f.Inhibitors = []Inhibitor{{What: "shutdown", Who: "kustodian", Mode: "delay"}} }, CheckKubeletInhibitor, Warn, "holds no delay inhibitor", "systemctl restart kubelet", 1},
		{"path unit disabled", func(f *Facts) { f.PathUnitFileState, f.PathUnitActiveState = "disabled", "inactive" }, CheckPathUnit, Fail, "kustodian.path is disabled and inactive", "systemctl enable --now kustodian.path", 2},
		{"path unit missing", func(f *Facts) { f.PathUnitFileState, f.PathUnitActiveState = "", "inactive" }, CheckPathUnit, Fail, "not installed", "", 2},
		{"token expires soon", func(f *Facts) { f.TokenExpires = f.Now.Add(72 * time.Hour) }, CheckKubeconfig, Warn, "expires in 72h0m0s", "kustodian-ctl kubeconfig node-1 --output-file node-1.kubeconfig --rotate", 1},
		{"token expired", func(f *Facts) { f.TokenExpires = f.Now.Add(-time.Hour) }, CheckKubeconfig, Fail, "expired at 2026-11-27T11:00:00Z", "--rotate", 2},
		{"API server unreachable", func(f *Facts) { f.ReachErr = errors.New("connection refused") }, CheckKubeconfig, Fail, "does not accept /etc/kustodian/kubeconfig: connection refused", "network", 2},
		{"no kubeconfig", func(f *Facts) { f.KubeconfigOK, f.ReachErr = false, errors.New("does not exist") }, CheckKubeconfig, Fail, "cannot be used: does not exist", "kustodian-ctl kubeconfig node-1", 2},
		{"Kured without the gate", func(f *Facts) { f.KuredArgs = []string{"/usr/bin/kured", "--period=1h"} }, CheckKured, Warn, "without Kustodian's reboot gate", `--reboot-sentinel-command="/usr/bin/kustodian reboot-gate"`, 1},
		// The Helm chart's own sentinel command comes after a patched one.
		{"Kured's gate overridden by a later flag", func(f *Facts) {
			f.KuredArgs = []string{"/usr/bin/kured", "--reboot-sentinel-command=/usr/bin/kustodian reboot-gate", "--ds-name=kured", "--reboot-sentinel-command=/sentinel/reboot-required"}
		}, CheckKured, Warn, `asks "/sentinel/reboot-required", not Kustodian's reboot gate`, "last --reboot-sentinel-command", 1},
		{"Kured absent", func(f *Facts) { f.KuredFound, f.KuredArgs = false, nil }, CheckKured, OK, "does not run here", "", 0},
		{"kubelet kubeconfig of another node", func(f *Facts) { f.KubeletUser = "system:node:node-2" }, CheckKubeletEvictions, Warn, "authenticates as system:node:node-2, not system:node:node-1", "", 1},
		{"no kubelet kubeconfig", func(f *Facts) { f.KubeletKubeconfig = "" }, CheckKubeletEvictions, Warn, "--kubelet-evictions would leave it unable to drain", "drain.kubeletKubeconfig", 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := healthy()
			c.change(&f)
			fs := Run(f)
			got := find(t, fs, c.check)
			if got.Status != c.status || !strings.Contains(got.Message, c.message) || !strings.Contains(got.Fix, c.fix) {
				t.Errorf("%s: %s %q\nfix %q\nwant %s, message with %q, fix with %q", c.check, got.Status, got.Message, got.Fix, c.status, c.message, c.fix)
			}
			if (got.Status == OK) != (got.Fix == "") {
				t.Errorf("status %s with fix %q", got.Status, got.Fix)
			}
			if ExitCode(fs) != c.exit {
				t.Errorf("exit %d, want %d", ExitCode(fs), c.exit)
			}
		})
	}
}

func TestAtStart(t *testing.T) {
	f := healthy()
	f.PathUnitFileState, f.KubeletUser = "disabled", "" // not the agent's checks at start
	if got := AtStart(f); len(got) != 0 {
		t.Errorf("a healthy host: %v", got)
	}
	f.InhibitDelayMax, f.Inhibitors = 30*time.Second, nil
	if got := AtStart(f); len(got) != 2 || got[0].Check != CheckInhibitDelay || got[1].Check != CheckKubeletInhibitor {
		t.Errorf("short delay, no kubelet inhibitor: %v", got)
	}
	f.KubeletConfig = ""
	if got := AtStart(f); len(got) != 0 {
		t.Errorf("no kubelet configuration: %v", got)
	}
}

func TestLogindDropIns(t *testing.T) {
	root := t.TempDir()
	write := func(rel, body string) {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("etc/systemd/logind.conf", "[Login]\n#InhibitDelayMaxSec=5\nInhibitDelayMaxSec=10\n")
	write("etc/systemd/logind.conf.d/99-kubelet.conf", "[Login]\nInhibitDelayMaxSec=60\n")
	write("usr/lib/systemd/logind.conf.d/unattended-upgrades-logind-maxdelay.conf", "[Login]\nInhibitDelayMaxSec=30\n")
	write("usr/lib/systemd/logind.conf.d/50-hidden.conf", "[Login]\nInhibitDelayMaxSec=1\n")
	write("etc/systemd/logind.conf.d/50-hidden.conf", "[Login]\nKillUserProcesses=no\n") // hides the one in /usr/lib
	write("run/systemd/logind.conf.d/10-other.conf", "[Other]\nInhibitDelayMaxSec=2\n")  // another section
	got, err := LogindDropIns(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []DropIn{{"/etc/systemd/logind.conf", 10 * time.Second}, {"/etc/systemd/logind.conf.d/99-kubelet.conf", time.Minute},
		{"/usr/lib/systemd/logind.conf.d/unattended-upgrades-logind-maxdelay.conf", 30 * time.Second}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("[%d] %v, want %v", i, got[i], want[i])
		}
	}
	write("etc/systemd/logind.conf.d/bad.conf", "[Login]\nInhibitDelayMaxSec=soon\n")
	if _, err := LogindDropIns(root); err == nil || !strings.Contains(err.Error(), "bad.conf: InhibitDelayMaxSec") {
		t.Errorf("a bad value: %v", err)
	}
}

func TestParseTimespan(t *testing.T) {
	for in, want := range map[string]time.Duration{"30": 30 * time.Second, "30s": 30 * time.Second, "1min 30s": 90 * time.Second,
		"2m30s": 150 * time.Second, "5min": 5 * time.Minute, "infinity": Infinity, "1w": 7 * 24 * time.Hour, "1.5": 1500 * time.Millisecond, "500ms": 500 * time.Millisecond, "1h": time.Hour} {
		if got, err := ParseTimespan(in); err != nil || got != want {
			t.Errorf("ParseTimespan(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "soon", "5 parsecs", "s"} {
		if _, err := ParseTimespan(bad); err == nil {
			t.Errorf("ParseTimespan(%q) accepted", bad)
		}
	}
}

// A host that runs rollouts and whose own updater still installs by
// itself is warned, with the fix; one that runs none is not.
func TestSelfUpdatesWarnsWhereCampaignsRun(t *testing.T) {
	u := "unattended-upgrades (APT::Periodic::Unattended-Upgrade \"1\")"
	for _, c := range []struct {
		f    Facts
		want Status
	}{
		{Facts{SelfUpdates: u, RolloutsEnabled: true}, Warn},
		{Facts{SelfUpdates: u}, OK},
		{Facts{RolloutsEnabled: true}, OK},
		{Facts{SelfUpdatesErr: errors.New("apt-config: not found"), RolloutsEnabled: true}, Unknown},
	} {
		r := selfUpdates(c.f)
		if r.Status != c.want || r.Status == Warn && !strings.Contains(r.Fix, "kustodian patch takeover") {
			t.Errorf("%+v: %+v, want %s", c.f, r, c.want)
		}
	}
}
