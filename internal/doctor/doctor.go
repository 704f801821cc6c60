// Package doctor judges whether a host is ready for the reboots and
// maintenances Kustodian makes, from facts gathered elsewhere (logind,
// the kubelet's configuration, systemd, the API server): every check is a
// pure function of Facts, and every finding that is not OK says how to fix
// it.
package doctor

import (
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// Status is a finding's verdict, worst last.
type Status string

const (
	OK      Status = "ok"
	Unknown Status = "unknown" // the fact could not be gathered
	Warn    Status = "warn"
	Fail    Status = "fail"
)

func (s Status) rank() int {
	return map[Status]int{OK: 0, Unknown: 1, Warn: 2, Fail: 3}[s]
}

// Finding is one check's verdict.
type Finding struct {
	Check   string `json:"check"`
	Status  Status `json:"status"`
	Message string `json:"message"`
	// Fix is what to do, when the status is not OK: a file to write, a
	// command to run.
	Fix string `json:"fix,omitempty"`
}

// Check names.
const (
	CheckInhibitDelay     = "logind-inhibit-delay"
	CheckKubeletInhibitor = "kubelet-inhibitor"
	CheckPathUnit         = "path-unit"
	CheckKubeconfig       = "kubeconfig"
	CheckKured            = "kured-sentinel"
	CheckKubeletEvictions = "kubelet-evictions"
	CheckSelfUpdates      = "self-updates"
)

// DropIn is a logind configuration file that sets InhibitDelayMaxSec.
type DropIn struct {
	Path  string
	Delay time.Duration
}

// Facts are what the checks judge. A fact whose Err is set could not be
// gathered; its check says so (Unknown) instead of guessing.
type Facts struct {
	Now  time.Time
	Node string

	// InhibitDelayMax is logind's effective InhibitDelayMaxSec.
	InhibitDelayMax time.Duration
	LogindErr       error
	// DropIns set InhibitDelayMaxSec, in the order logind reads them (the
	// last one wins).
	DropIns []DropIn
	// Inhibitors are logind's inhibitor locks (who, mode, what).
	Inhibitors []Inhibitor

	// KubeletConfig is the kubelet's configuration file ("": none found);
	// ShutdownGracePeriod and ShutdownGracePeriodCriticalPods are read
	// from it.
	KubeletConfig                   string
	KubeletConfigErr                error
	ShutdownGracePeriod             time.Duration
	ShutdownGracePeriodCriticalPods time.Duration

	// PathUnit is kustodian.path's UnitFileState and ActiveState.
	PathUnitFileState, PathUnitActiveState string
	PathUnitErr                            error

	// Kubeconfig is the node's kubeconfig; TokenExpires the expiry of the
	// token in use (the kubeconfig's or its renewal; zero: unknown), and
	// TokenLateAt when it should have been renewed by (zero: it does not
	// say when it was issued); ReachErr the API server's answer.
	Kubeconfig   string
	KubeconfigOK bool // it loaded
	TokenExpires time.Time
	TokenLateAt  time.Time
	ReachErr     error

	// Kured: whether its DaemonSet exists, and its containers' arguments.
	KuredDaemonSet string // namespace/name
	KuredDisabled  bool   // kured.enabled is false: not looked at
	KuredFound     bool
	KuredArgs      []string
	KuredErr       error

	// KubeletKubeconfig is the kubelet's kubeconfig ("": none found);
	// KubeletUser who the API server says it is; KubeletErr why it could
	// not be used.
	KubeletKubeconfig string
	KubeletUser       string
	KubeletErr        error

	// SelfUpdates is what installs package updates on the host by itself,
	// outside the queue ("": nothing); RolloutsEnabled, whether the host
	// runs rollouts (patch campaigns among them).
	SelfUpdates     string
	SelfUpdatesErr  error
	RolloutsEnabled bool
}

// Inhibitor is one logind inhibitor lock.
type Inhibitor struct{ What, Who, Mode string }

// TokenWarnBefore is how long before it expires the doctor warns of a
// token that does not say when it was issued (as the agent does).
const TokenWarnBefore = 14 * 24 * time.Hour

// DropInDir is where the fix for logind's delay goes.
const DropInDir = "/etc/systemd/logind.conf.d"

// UnattendedUpgradesDropIn is the drop-in of Ubuntu's unattended-upgrades
// that sets InhibitDelayMaxSec=30 (kubernetes#102818).
const UnattendedUpgradesDropIn = "unattended-upgrades-logind-maxdelay.conf"

// askSystemd is the fix of a fact systemd or logind did not give.
const askSystemd = "run kustodian doctor as root on the host itself, booted with systemd (systemctl status systemd-logind dbus)"

// Run runs every check, in a fixed order.
func Run(f Facts) []Finding {
	return []Finding{inhibitDelay(f), kubeletInhibitor(f), pathUnit(f), kubeconfig(f), kured(f), kubeletEvictions(f), selfUpdates(f)}
}

// AtStart are the checks the agent makes when it starts (the host's own
// facts, no API call): only what is wrong, and nothing where the host has
// no kubelet configuration to judge.
func AtStart(f Facts) []Finding {
	if f.KubeletConfig == "" {
		return nil
	}
	var out []Finding
	for _, r := range []Finding{inhibitDelay(f), kubeletInhibitor(f)} {
		if r.Status == Warn || r.Status == Fail {
			out = append(out, r)
		}
	}
	return out
}

// Worst is the worst status among findings.
func Worst(fs []Finding) Status {
	worst := OK
	for _, f := range fs {
		if f.Status.rank() > worst.rank() {
			worst = f.Status
		}
	}
	return worst
}

// ExitCode is the doctor's exit code for findings, as monitoring plugins
// have it: 0 all OK, 1 a warning (or a fact that could not be gathered),
// 2 a failure.
func ExitCode(fs []Finding) int {
	switch Worst(fs) {
	case Fail:
		return 2
	case Warn, Unknown:
		return 1
	}
	return 0
}

func inhibitDelay(f Facts) Finding {
	r := Finding{Check: CheckInhibitDelay}
	switch {
	case f.KubeletConfigErr != nil:
		r.Status, r.Message = Unknown, fmt.Sprintf("the kubelet's configuration cannot be read: %v", f.KubeletConfigErr)
		r.Fix = "give its path: kustodian doctor --kubelet-config PATH"
		return r
	case f.KubeletConfig == "":
		r.Status, r.Message = Warn, "no kubelet configuration file found: graceful node shutdown cannot be checked"
		r.Fix = "give its path: kustodian doctor --kubelet-config PATH"
		return r
	case f.ShutdownGracePeriod <= 0:
		r.Status = Warn
		r.Message = fmt.Sprintf("graceful node shutdown is off (%s sets no shutdownGracePeriod): a shutdown that Kustodian did not drain for kills the pods without their grace period", f.KubeletConfig)
		r.Fix = fmt.Sprintf("set shutdownGracePeriod (and shutdownGracePeriodCriticalPods) in %s, e.g. 60s and 20s, and restart the kubelet", f.KubeletConfig)
		return r
	case f.LogindErr != nil:
		r.Status, r.Message, r.Fix = Unknown, fmt.Sprintf("logind's InhibitDelayMaxSec cannot be read: %v", f.LogindErr), askSystemd
		return r
	}
	grace := fmt.Sprintf("the kubelet's shutdownGracePeriod %s (%s)", f.ShutdownGracePeriod, f.KubeletConfig)
	if f.InhibitDelayMax >= f.ShutdownGracePeriod {
		r.Status, r.Message = OK, fmt.Sprintf("logind's InhibitDelayMaxSec %s covers %s", f.InhibitDelayMax, grace)
		return r
	}
	r.Status = Fail
	if n := len(f.DropIns); n > 0 && f.DropIns[n-1].Delay >= f.ShutdownGracePeriod {
		r.Message = fmt.Sprintf("logind runs with InhibitDelayMaxSec %s, shorter than %s, though its files say %s (%s): logind was not restarted since",
			f.InhibitDelayMax, grace, f.DropIns[n-1].Delay, f.DropIns[n-1].Path)
		r.Fix = "systemctl restart systemd-logind"
		return r
	}
	r.Message = fmt.Sprintf("logind's InhibitDelayMaxSec %s%s is shorter than %s: at a shutdown the kubelet's pods are killed before their grace period ends",
		f.InhibitDelayMax, setBy(f.DropIns), grace)
	name := fixName(f.DropIns)
	r.Fix = fmt.Sprintf("write %s with \"[Login]\\nInhibitDelayMaxSec=%d\" (its name sorts after every other drop-in, so it wins), then systemctl restart systemd-logind",
		filepath.Join(DropInDir, name), int(f.ShutdownGracePeriod.Round(time.Second)/time.Second))
	return r
}

// setBy says which file set logind's delay, and why it wins.
func setBy(dropIns []DropIn) string {
	if len(dropIns) == 0 {
		return ""
	}
	last := dropIns[len(dropIns)-1]
	s := " (set by " + last.Path
	if filepath.Base(last.Path) == UnattendedUpgradesDropIn {
		s += ": unattended-upgrades' override"
		for _, d := range dropIns[:len(dropIns)-1] {
			if d.Delay > last.Delay {
				s += ", which sorts after " + filepath.Base(d.Path) + " and wins over it"
				break
			}
		}
	}
	return s + ")"
}

// fixName is a drop-in name that sorts after every drop-in that sets the
// delay (logind reads them by name, whatever their directory): ours, or,
// when another sorts after it, that name with ours appended.
func fixName(dropIns []DropIn) string {
	name := "zz-kustodian.conf"
	for _, d := range dropIns {
		if base := filepath.Base(d.Path); base >= name && base != "zz-kustodian.conf" {
			name = strings.TrimSuffix(base, ".conf") + ".zz-kustodian.conf"
		}
	}
	return name
}

func kubeletInhibitor(f Facts) Finding {
	r := Finding{Check: CheckKubeletInhibitor}
	switch {
	case f.KubeletConfig == "" || f.KubeletConfigErr != nil || f.ShutdownGracePeriod <= 0:
		r.Status, r.Message = OK, "not needed: graceful node shutdown is not configured (see "+CheckInhibitDelay+")"
		return r
	case f.LogindErr != nil:
		r.Status, r.Message, r.Fix = Unknown, fmt.Sprintf("logind's inhibitors cannot be listed: %v", f.LogindErr), askSystemd
		return r
	}
	for _, i := range f.Inhibitors {
		if i.Who == "kubelet" && i.Mode == "delay" && strings.Contains(":"+i.What+":", ":shutdown:") {
			r.Status, r.Message = OK, "the kubelet holds its delay inhibitor on shutdown: graceful node shutdown is active"
			return r
		}
	}
	r.Status = Warn
	r.Message = "the kubelet holds no delay inhibitor on shutdown: its graceful node shutdown is not active (the kubelet is not running, or gave up because logind's InhibitDelayMaxSec was too short when it started)"
	r.Fix = "fix " + CheckInhibitDelay + " first, then systemctl restart kubelet; systemd-inhibit --list shows the kubelet's lock"
	return r
}

func pathUnit(f Facts) Finding {
	r := Finding{Check: CheckPathUnit}
	switch {
	case f.PathUnitErr != nil:
		r.Status, r.Message, r.Fix = Unknown, fmt.Sprintf("systemd cannot be asked about kustodian.path: %v", f.PathUnitErr), askSystemd
	case f.PathUnitFileState == "enabled" && f.PathUnitActiveState == "active":
		r.Status, r.Message = OK, "kustodian.path is enabled and active: a request starts the agent"
	default:
		r.Status = Fail
		r.Message = fmt.Sprintf("kustodian.path is %s and %s: a maintenance request would not start the agent", orNone(f.PathUnitFileState), orNone(f.PathUnitActiveState))
		r.Fix = "systemctl enable --now kustodian.path"
	}
	return r
}

func orNone(s string) string {
	if s == "" {
		return "not installed"
	}
	return s
}

func kubeconfig(f Facts) Finding {
	r := Finding{Check: CheckKubeconfig}
	renew := fmt.Sprintf("on an admin's machine: kustodian-ctl kubeconfig %s --output-file %s.kubeconfig --rotate, then copy it to %s", nodeOr(f.Node), nodeOr(f.Node), f.Kubeconfig)
	switch {
	case !f.KubeconfigOK:
		r.Status, r.Message = Fail, fmt.Sprintf("the node's kubeconfig cannot be used: %v", f.ReachErr)
		r.Fix = fmt.Sprintf("on an admin's machine: kustodian-ctl kubeconfig %s --output-file %s.kubeconfig, then copy it to %s", nodeOr(f.Node), nodeOr(f.Node), f.Kubeconfig)
		return r
	case !f.TokenExpires.IsZero() && !f.Now.Before(f.TokenExpires):
		r.Status, r.Message, r.Fix = Fail, fmt.Sprintf("the token of %s expired at %s", f.Kubeconfig, f.TokenExpires.UTC().Format(time.RFC3339)), renew
		return r
	case f.ReachErr != nil:
		r.Status, r.Message = Fail, fmt.Sprintf("the API server does not accept %s: %v", f.Kubeconfig, f.ReachErr)
		r.Fix = "check the server address and this host's network to it, and the token (" + renew + ")"
		return r
	case !f.TokenLateAt.IsZero() && !f.Now.Before(f.TokenLateAt):
		r.Status, r.Message = Warn, fmt.Sprintf("the token of %s expires in %s (%s) and has not been renewed", f.Kubeconfig, f.TokenExpires.Sub(f.Now).Round(time.Minute), f.TokenExpires.UTC().Format(time.RFC3339))
		r.Fix = "the node renews it itself (the agent, and kustodian-renew.timer between its runs): see systemctl status kustodian-renew.timer and journalctl -u kustodian-renew; or " + renew
		return r
	case f.TokenLateAt.IsZero() && !f.TokenExpires.IsZero() && f.TokenExpires.Sub(f.Now) < TokenWarnBefore:
		r.Status, r.Message, r.Fix = Warn, fmt.Sprintf("the token of %s expires in %s (%s)", f.Kubeconfig, f.TokenExpires.Sub(f.Now).Round(time.Hour), f.TokenExpires.UTC().Format(time.RFC3339)), renew
		return r
	}
	r.Status = OK
	r.Message = fmt.Sprintf("%s reaches the API server as node %s", f.Kubeconfig, nodeOr(f.Node))
	if !f.TokenExpires.IsZero() {
		r.Message += fmt.Sprintf("; its token expires on %s", f.TokenExpires.UTC().Format("2006-01-02"))
	}
	return r
}

func nodeOr(n string) string {
	if n == "" {
		return "NODE"
	}
	return n
}

// GateCommand is what Kured's --reboot-sentinel-command must run.
const GateCommand = "kustodian reboot-gate"

func kured(f Facts) Finding {
	r := Finding{Check: CheckKured}
	switch {
	case f.KuredDisabled:
		r.Status, r.Message = OK, "not looked at: kured.enabled is false"
		return r
	case f.KuredErr != nil:
		r.Status, r.Message = Unknown, fmt.Sprintf("Kured's DaemonSet %s cannot be read: %v", f.KuredDaemonSet, f.KuredErr)
		r.Fix = "fix " + CheckKubeconfig + " first; kured.namespace and kured.daemonSet name Kured's DaemonSet, and kustodian-ctl install --kured-namespace lets the agents read it there"
		return r
	case !f.KuredFound:
		r.Status, r.Message = OK, fmt.Sprintf("Kured does not run here (no DaemonSet %s)", f.KuredDaemonSet)
		return r
	}
	// Kured parses its flags with pflag: of two values the last wins (the
	// Helm chart puts one of its own in args, after the command).
	sentinel := ""
	for _, a := range f.KuredArgs {
		if v, ok := strings.CutPrefix(a, "--reboot-sentinel-command="); ok {
			sentinel = v
		}
	}
	if strings.Contains(sentinel, GateCommand) {
		r.Status, r.Message = OK, fmt.Sprintf("Kured (%s) asks %q before it reboots", f.KuredDaemonSet, sentinel)
		return r
	}
	r.Status = Warn
	r.Message = fmt.Sprintf("Kured (%s) runs without Kustodian's reboot gate: it may reboot this node while it waits for a maintenance, or past a logind block inhibitor", f.KuredDaemonSet)
	if sentinel != "" {
		r.Message = fmt.Sprintf("Kured (%s) asks %q, not Kustodian's reboot gate, before it reboots: it may reboot this node while it waits for a maintenance, or past a logind block inhibitor", f.KuredDaemonSet, sentinel)
	}
	r.Fix = fmt.Sprintf("make Kured's last --reboot-sentinel-command=%q (docs/kured.md in Kustodian's documentation: a Helm value, or a patch that keeps Kured's other flags)", "/usr/bin/"+GateCommand)
	return r
}

func kubeletEvictions(f Facts) Finding {
	r := Finding{Check: CheckKubeletEvictions}
	want := "system:node:" + f.Node
	switch {
	case f.KubeletKubeconfig == "":
		r.Status, r.Message = Warn, "no kubelet kubeconfig found: the agent evicts with its own rights, so kustodian-ctl install --kubelet-evictions would leave it unable to drain this node"
		r.Fix = "set drain.kubeletKubeconfig to the kubelet's kubeconfig"
	case f.KubeletErr != nil:
		r.Status, r.Message = Warn, fmt.Sprintf("the kubelet's kubeconfig %s cannot be used: %v", f.KubeletKubeconfig, f.KubeletErr)
		r.Fix = "check the kubelet's client certificate (its rotation), or set drain.kubeletKubeconfig"
	case f.Node != "" && f.KubeletUser != want:
		r.Status, r.Message = Warn, fmt.Sprintf("the kubelet's kubeconfig %s authenticates as %s, not %s: the API server would not let it evict this node's pods", f.KubeletKubeconfig, f.KubeletUser, want)
		r.Fix = "set drain.kubeletKubeconfig to this node's kubelet kubeconfig"
	default:
		r.Status, r.Message = OK, fmt.Sprintf("the agent evicts as %s with %s: this node is ready for kustodian-ctl install --kubelet-evictions", f.KubeletUser, f.KubeletKubeconfig)
	}
	return r
}

// selfUpdates warns of a host whose own updater installs packages by
// itself, on every node within the same hour, beside the patch campaigns
// the host runs.
func selfUpdates(f Facts) Finding {
	r := Finding{Check: CheckSelfUpdates}
	switch {
	case f.SelfUpdatesErr != nil:
		r.Status, r.Message = Unknown, "cannot tell whether the host installs updates by itself: "+f.SelfUpdatesErr.Error()
		r.Fix = "run kustodian doctor as root on the host itself"
	case f.SelfUpdates == "":
		r.Status, r.Message = OK, "nothing installs package updates on this host by itself"
	case !f.RolloutsEnabled:
		r.Status, r.Message = OK, f.SelfUpdates+" installs package updates by itself (this host runs no rollouts, so no patch campaign)"
	default:
		r.Status = Warn
		r.Message = f.SelfUpdates + " installs package updates on this host by itself, outside the queue, while patch campaigns install them through it"
		r.Fix = "kustodian patch takeover (its downloads go on; only patch campaigns install), or the Ansible role's kustodian_patch_takeover: true"
	}
	return r
}
