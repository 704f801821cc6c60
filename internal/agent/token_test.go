package agent

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/lock"
)

func TestTokenWarning(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		expires time.Time
		want    string
	}{
		{time.Time{}, ""},
		{now.Add(15 * 24 * time.Hour), ""},
		{now.Add(10 * 24 * time.Hour), "the token of /etc/kustodian/kubeconfig expires in 10d (2026-12-03T12:00:00Z); renew it: kustodian-ctl kubeconfig n1 --rotate"},
		{now.Add(-time.Hour), "the token of /etc/kustodian/kubeconfig expired at 2026-11-23T11:00:00Z; renew it: kustodian-ctl kubeconfig n1 --rotate"},
	} {
		a := New(Options{Config: config.Agent{Kubeconfig: "/etc/kustodian/kubeconfig"}, NodeName: "n1", Log: slog.New(slog.DiscardHandler),
			TokenExpires: tc.expires, Clock: testingclock.NewFakeClock(now)})
		if got := a.tokenWarning(); got != tc.want {
			t.Errorf("expires %v: %q, want %q", tc.expires, got, tc.want)
		}
		if line := a.statusLine(lock.Waiting, lock.Record{Message: "position 1 of 1"}, ""); tc.want != "" && !strings.Contains(line, tc.want) {
			t.Errorf("STATUS %q does not warn", line)
		}
	}
}
