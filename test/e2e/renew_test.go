package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/kustodian/kustodian/internal/identity"
	"github.com/kustodian/kustodian/test/cluster"
	"github.com/kustodian/kustodian/test/nodecreds"
)

// Between the agent's runs the node's token is renewed by
// kustodian-renew.timer, which the package enables and starts: its
// service, in its sandbox, leaves a token alone until it is due, then
// renews it into the state directory, and the node's commands use the
// renewal.
func TestTheRenewTimerRenewsADueToken(t *testing.T) {
	t.Parallel()
	e := cluster.New(t)
	h := newHost(t, e, 0)
	h.run("systemd-analyze", "verify", "--man=no", "/lib/systemd/system/kustodian-renew.service", "/lib/systemd/system/kustodian-renew.timer")
	if got := h.property("kustodian-renew.timer", "UnitFileState") + " " + h.property("kustodian-renew.timer", "ActiveState"); got != "enabled active" {
		t.Errorf("kustodian-renew.timer is %s, want enabled active", got)
	}
	// A 10-minute token, due 6m40s after it was issued.
	path := filepath.Join(t.TempDir(), "short.kubeconfig")
	if out, err := nodecreds.CtlFor(e).Run(e.Ctx, "kubeconfig", h.Name, "--output-file", path, "--duration", "10m"); err != nil {
		t.Fatalf("kustodian-ctl kubeconfig: %v\n%s", err, out)
	}
	copyFile(t, path, filepath.Join(h.Dir, "etc/kustodian/kubeconfig"), 0o600)
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	first, _, err := identity.ParseToken(cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo].Token)
	if err != nil {
		t.Fatal(err)
	}
	renewal := filepath.Join(h.Dir, "var/lib/kustodian", identity.TokenFileName)
	h.run("systemctl", "start", "kustodian-renew.service")
	if h.exists("var/lib/kustodian/" + identity.TokenFileName) {
		t.Fatal("a token that is not due was renewed")
	}
	if got := h.property("kustodian-renew.service", "Result"); got != "success" {
		t.Errorf("kustodian-renew.service: %s", got)
	}
	e.Eventually("the token is due", 8*time.Minute, func(context.Context) error {
		if left := time.Until(first.RenewAt()); left > 0 {
			return fmt.Errorf("due in %s", left.Round(time.Second))
		}
		return nil
	})
	h.run("systemctl", "start", "kustodian-renew.service")
	b, err := os.ReadFile(renewal)
	if err != nil {
		t.Fatalf("no renewal: %v\n%s", err, h.Journal(e.Ctx, "kustodian-renew.service"))
	}
	renewed, ok, err := identity.ParseToken(string(b))
	if err != nil || !ok || renewed.Node != h.Name || renewed.NodeUID != first.NodeUID || renewed.Expires <= first.Expires || renewed.Lifetime() != 10*time.Minute {
		t.Fatalf("the renewal: %+v %v", renewed, err)
	}
	// The node's commands use it, and the API server takes it.
	out := h.run("kustodian", "credentials")
	if !strings.Contains(out, "(renewed: /var/lib/kustodian/token)") {
		t.Errorf("kustodian credentials: %s", out)
	}
	report, _ := h.doctor()
	judged := false
	for _, f := range report.Findings {
		if f.Check == "kubeconfig" {
			judged = true
			if !strings.EqualFold(f.Status, "ok") || !strings.Contains(f.Message, "reaches the API server as node "+h.Name) {
				t.Errorf("doctor with the renewed token: %s", report)
			}
		}
	}
	if !judged {
		t.Errorf("doctor has no kubeconfig finding: %s", report)
	}
}
