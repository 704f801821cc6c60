package agent

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/identity"
	"github.com/kustodian/kustodian/internal/lock"
)

func TestTokenWarning(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	// A 90-day token issued days ago: due at 60 days, late at 67.5.
	issued := func(daysAgo float64) identity.Token {
		iat := now.Add(-time.Duration(daysAgo * 24 * float64(time.Hour)))
		return identity.Token{Node: "n1", Issued: iat.Unix(), Expires: iat.Add(90 * 24 * time.Hour).Unix()}
	}
	for _, tc := range []struct {
		name    string
		token   identity.Token
		failure error
		reason  string
		want    string
	}{
		{"no token", identity.Token{}, nil, "", ""},
		{"fresh", issued(1), nil, "", ""},
		{"due, not yet late", issued(65), nil, "", ""},
		{"late", issued(70), nil, ReasonTokenExpiring,
			"the token of /etc/kustodian/kubeconfig expires in 20d (2026-12-13T12:00:00Z) and is not renewed; renew it: kustodian-ctl kubeconfig n1 --rotate"},
		{"renewal failed", issued(61), errors.New("forbidden"), ReasonTokenRenewalFailed,
			"the node's token expires in 29d (2026-12-22T12:00:00Z) and its renewal failed, trying again every 10m0s: forbidden"},
		{"expired", issued(91), nil, ReasonTokenExpiring,
			"the token of /etc/kustodian/kubeconfig expired at 2026-11-22T12:00:00Z; renew it: kustodian-ctl kubeconfig n1 --rotate"},
		// A token that does not say when it was issued: 14 days ahead.
		{"no iat, far", identity.Token{Expires: now.Add(15 * 24 * time.Hour).Unix()}, nil, "", ""},
		{"no iat, near", identity.Token{Expires: now.Add(10 * 24 * time.Hour).Unix()}, nil, ReasonTokenExpiring,
			"the token of /etc/kustodian/kubeconfig expires in 10d (2026-12-03T12:00:00Z) and is not renewed; renew it: kustodian-ctl kubeconfig n1 --rotate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := New(Options{Config: config.Agent{Kubeconfig: "/etc/kustodian/kubeconfig", StateDir: t.TempDir()}, NodeName: "n1", Log: slog.New(slog.DiscardHandler),
				Token: tc.token, Clock: testingclock.NewFakeClock(now)})
			if tc.failure != nil {
				a.TokenRenewalFailed(tc.failure, tc.token, identity.RetryAfter(tc.token))
			}
			if reason, got := a.tokenWarning(); reason != tc.reason || got != tc.want {
				t.Errorf("%s %q, want %s %q", reason, got, tc.reason, tc.want)
			}
			if line := a.statusLine(lock.Waiting, lock.Record{Message: "position 1 of 1"}, ""); tc.want != "" && !strings.Contains(line, tc.want) {
				t.Errorf("STATUS %q does not warn", line)
			}
			if tc.failure != nil {
				a.TokenRenewed(issued(0))
				if reason, got := a.tokenWarning(); got != "" {
					t.Errorf("after a renewal: %s %q", reason, got)
				}
			}
		})
	}
}
