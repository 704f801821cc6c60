package agent

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/kustodian/kustodian/internal/alertmanager"
	"github.com/kustodian/kustodian/internal/config"
	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/policy"
)

// Event reasons of the silences.
const (
	ReasonAlertsSilenced = "AlertsSilenced"
	ReasonSilenceFailed  = "SilenceFailed"
	ReasonSilenceExpired = "SilenceExpired"
)

// silenceWant is what the silencer is to make true in Alertmanager.
type silenceWant struct {
	on     bool
	am     *policy.Alertmanager // the node's policy's; nil: none
	fields policy.SilenceFields
	reason string
	uid    types.UID
}

// silencer keeps the node's silence in Alertmanager apart from the Run
// loop: Alertmanager being slow or away never holds a maintenance back. It
// finds its silence again by its creator (kustodian:<node>), so an agent
// started again (after a reboot) extends or expires the silence the one
// before made.
type silencer struct {
	node   string
	log    *slog.Logger
	now    func() time.Time
	clock  clock.WithTicker
	client func(*policy.Alertmanager) (*alertmanager.Client, error)
	// event records an Event on this node's Node.
	event func(ctx context.Context, uid types.UID, eventType, reason, message string)
	kick  chan struct{}

	mu     sync.Mutex
	want   silenceWant
	last   *policy.Alertmanager // where the silence was last kept
	report string               // what the record says of the silence
	failed string               // the failure last reported as an Event
}

func newSilencer(a *Agent) *silencer {
	return &silencer{node: a.node, log: a.log, now: a.now, clock: a.clock, client: a.alertmanagerClient, event: a.nodeEvent,
		kick: make(chan struct{}, 1)}
}

// creator is the silence's createdBy.
func (s *silencer) creator() string { return "kustodian:" + s.node }

// set tells the silencer what the node's state asks for.
func (s *silencer) set(state lock.State, r lock.Record, node *corev1.Node, am *policy.Alertmanager) {
	w := silenceWant{on: decide.Silenced(state), reason: r.Reason, fields: policy.SilenceFields{Node: s.node, Policy: r.Policy, Group: r.Group}}
	if am != nil && am.Silence != nil {
		w.am = am
	}
	if node != nil {
		w.uid = node.UID
	}
	s.mu.Lock()
	changed := w.on != s.want.on || w.am != s.want.am || w.reason != s.want.reason
	s.want = w
	s.mu.Unlock()
	if changed {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// status is what the record says of the silence: "" when there is none.
func (s *silencer) status() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.report
}

// start runs the silencer apart from the Run loop until the returned stop
// is called; stop syncs once more (expiring the silence when the node is
// back) within the notifications' bound, shorter when the agent is being
// stopped (agentCtx ended: a shutdown, a reboot).
func (s *silencer) start(agentCtx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(agentCtx))
	done := make(chan struct{})
	go s.run(ctx, done, func() time.Duration {
		if agentCtx.Err() != nil {
			return notifyGraceStopping
		}
		return notifyGrace
	})
	return func() { cancel(); <-done }
}

// run keeps the silence until ctx ends, then syncs once more within grace
// (expiring it when the node is back; leaving it, bounded, when not).
func (s *silencer) run(ctx context.Context, done chan<- struct{}, grace func() time.Duration) {
	defer close(done)
	timer := s.clock.NewTimer(time.Hour)
	defer timer.Stop()
	backoff := RetryBackoff(time.Second)
	for {
		select {
		case <-ctx.Done():
			final, cancel := context.WithTimeout(context.Background(), grace())
			_, _ = s.sync(final)
			cancel()
			return
		case <-s.kick:
		case <-timer.C():
		}
		// A sync under way when stop comes finishes (within grace): cut
		// short, Alertmanager may have done what it was asked, unreported.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace())
		next, err := s.sync(sctx)
		cancel()
		if err != nil {
			next = backoff.Step()
		} else {
			backoff = RetryBackoff(time.Second)
		}
		timer.Reset(next)
	}
}

// sync makes Alertmanager agree with what is wanted, and says when to
// look again.
func (s *silencer) sync(ctx context.Context) (time.Duration, error) {
	s.mu.Lock()
	w, am := s.want, s.want.am
	if am == nil {
		am = s.last // the policy changed: the silence made before goes
		w.on = false
	}
	s.mu.Unlock()
	if am == nil {
		return time.Hour, nil
	}
	err := s.apply(ctx, w, am)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		msg := fmt.Sprintf("silence in %s failed (retrying; the maintenance goes on): %v", am.URL, err)
		s.report = "failed: " + err.Error()
		if s.failed != err.Error() {
			s.failed = err.Error()
			s.log.Warn("silence failed; retrying, the maintenance goes on", "alertmanager", am.URL, "err", err)
			s.event(ctx, w.uid, corev1.EventTypeWarning, ReasonSilenceFailed, msg)
		}
		return 0, err
	}
	s.failed = ""
	if !w.on {
		s.last = nil
		return time.Hour, nil
	}
	s.last = am
	// Extended when half of it is left: look again a little before.
	return am.Silence.SilenceDuration() / 4, nil
}

// apply creates, extends or expires the node's silence.
func (s *silencer) apply(ctx context.Context, w silenceWant, am *policy.Alertmanager) error {
	client, err := s.client(am)
	if err != nil {
		return err
	}
	all, err := client.Silences(ctx)
	if err != nil {
		return err
	}
	var mine []alertmanager.Silence
	for _, si := range all {
		if si.CreatedBy == s.creator() && si.Active() {
			mine = append(mine, si)
		}
	}
	if !w.on {
		for _, si := range mine {
			if err := client.Expire(ctx, si.ID); err != nil {
				return err
			}
			s.log.Info("silence expired", "alertmanager", am.URL, "id", si.ID)
			s.event(ctx, w.uid, corev1.EventTypeNormal, ReasonSilenceExpired, fmt.Sprintf("silence %s in %s expired: the node's alerts are back", si.ID, am.URL))
		}
		s.setReport("")
		return nil
	}
	want, err := s.silence(w, am)
	if err != nil {
		return err
	}
	now := s.now()
	dur := am.Silence.SilenceDuration()
	if len(mine) > 0 {
		cur := mine[0]
		for _, extra := range mine[1:] {
			if err := client.Expire(ctx, extra.ID); err != nil {
				return err
			}
		}
		if sameMatchers(cur.Matchers, want.Matchers) && cur.Comment == want.Comment && cur.EndsAt.Sub(now) > dur/2 {
			s.setReport(fmt.Sprintf("%s until %s", cur.ID, cur.EndsAt.UTC().Format(time.RFC3339)))
			return nil
		}
		want.ID, want.StartsAt = cur.ID, cur.StartsAt
	}
	id, err := client.PutSilence(ctx, want)
	if err != nil {
		return err
	}
	s.setReport(fmt.Sprintf("%s until %s", id, want.EndsAt.UTC().Format(time.RFC3339)))
	if len(mine) == 0 {
		s.log.Info("alerts silenced", "alertmanager", am.URL, "id", id, "until", want.EndsAt)
		s.event(ctx, w.uid, corev1.EventTypeNormal, ReasonAlertsSilenced, fmt.Sprintf("silence %s in %s over %s until %s, extended while the maintenance lasts",
			id, am.URL, matcherList(want.Matchers), want.EndsAt.UTC().Format(time.RFC3339)))
	}
	return nil
}

func (s *silencer) setReport(r string) {
	s.mu.Lock()
	s.report = r
	s.mu.Unlock()
}

// silence is the silence wanted for the node, from now to its bound.
func (s *silencer) silence(w silenceWant, am *policy.Alertmanager) (alertmanager.Silence, error) {
	ms, err := alertmanager.RenderMatchers(am.Silence, w.fields)
	if err != nil {
		return alertmanager.Silence{}, fmt.Errorf("spec.alertmanager.silence: %w", err)
	}
	link, err := alertmanager.RenderLink(am.Silence, w.fields)
	if err != nil {
		return alertmanager.Silence{}, fmt.Errorf("spec.alertmanager.silence.link: %w", err)
	}
	comment := fmt.Sprintf("Kustodian: node %s is in maintenance (%s), policy %s; the silence ends when the node is back or its maintenance fails",
		w.fields.Node, orNone(w.reason), w.fields.Policy)
	if link != "" {
		comment += "; " + link
	}
	now := s.now()
	out := alertmanager.Silence{StartsAt: now, EndsAt: now.Add(am.Silence.SilenceDuration()), CreatedBy: s.creator(), Comment: comment}
	for _, m := range ms {
		out.Matchers = append(out.Matchers, alertmanager.Matcher{Name: m.Name, Value: m.Value, IsRegex: m.IsRegex, IsEqual: m.IsEqual})
	}
	return out, nil
}

func orNone(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

func sameMatchers(a, b []alertmanager.Matcher) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func matcherList(ms []alertmanager.Matcher) string {
	var out []string
	for _, m := range ms {
		out = append(out, m.String())
	}
	return "{" + strings.Join(out, ", ") + "}"
}

// alertmanagerClient is a client of the policy's Alertmanager, which must
// be one this host's configuration lists (alertmanager.endpoints), with
// the credentials the host gives it, read afresh each time (a rotated
// token is used at once). A policy chooses among the host's Alertmanagers;
// it never names a file or a new destination. The credentials never
// appear in an error or a log line.
func (a *Agent) alertmanagerClient(am *policy.Alertmanager) (*alertmanager.Client, error) {
	auth, err := remoteAuth(a.cfg.Alertmanager.Endpoints, "alertmanager.endpoints", am.URL)
	if err != nil {
		return nil, fmt.Errorf("spec.alertmanager.url: %w", err)
	}
	return &alertmanager.Client{URL: am.URL, HTTP: a.gates.http, Auth: auth}, nil
}

// remoteAuth finds url among the host's endpoints (the configuration key
// key) and reads the credentials the host sends it.
func remoteAuth(endpoints config.Endpoints, key, url string) (config.Auth, error) {
	e, err := endpoints.Lookup(key, url)
	if err != nil {
		return config.Auth{}, err
	}
	return e.Auth()
}
