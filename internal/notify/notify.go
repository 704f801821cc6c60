// Package notify sends the agent's notifications through shoutrrr URLs
// (Slack, Teams, mail, a generic webhook...): one message per event the
// agent lived, rendered from a Go template (DESIGN section 14).
//
// Sending never blocks the state machine: a message is queued, and each
// URL has its own sender that tries it a bounded number of times. A URL
// that fails is logged once, not at every attempt, and never with its
// secrets.
package notify

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/nicholas-fedor/shoutrrr/pkg/router"
	"github.com/nicholas-fedor/shoutrrr/pkg/types"
)

// Event is what a notification is about.
type Event string

// The events, in the order of a maintenance.
const (
	Started   Event = "started"   // the node took the lock; its drain begins
	Completed Event = "completed" // the maintenance is over, the node is back
	Failed    Event = "failed"    // the maintenance failed (a drain, a job, an admin's release)
	Blocked   Event = "blocked"   // the node waited past its policy's health.blockedAfter
)

// Events are all the events.
var Events = []Event{Started, Completed, Failed, Blocked}

// Data is what a template sees.
type Data struct {
	Event   Event
	Node    string
	Reason  string // the request's reason ("" when it gave none)
	Message string // what the node's record says
	Group   string // the node's group in its policy
	Policy  string // the node's MaintenancePolicy ("" for the default)
	Time    time.Time
	// Requested is when the maintenance was requested; Duration is the
	// time since then (for started and blocked: the wait; for completed
	// and failed: the whole maintenance so far).
	Requested time.Time
	Duration  time.Duration
}

// DefaultTemplates are the messages sent unless the configuration says
// otherwise.
var DefaultTemplates = map[Event]string{
	Started:   `Kustodian: {{.Node}} took the maintenance lock and is draining{{with .Reason}} ({{.}}){{end}}; it waited {{.Duration}}`,
	Completed: `Kustodian: {{.Node}} completed its maintenance{{with .Reason}} ({{.}}){{end}} in {{.Duration}}`,
	Failed:    `Kustodian: the maintenance of {{.Node}} FAILED: {{.Message}}`,
	Blocked:   `Kustodian: {{.Node}} has waited {{.Duration}} for its maintenance: {{.Message}}`,
}

// sample is the data a template is tried on when it is parsed, so that a
// field it names that does not exist is refused at start, not at the
// first failure.
var sample = Data{Event: Failed, Node: "node-1", Reason: "kernel", Message: "drain failed", Group: "default",
	Time: time.Unix(1700000000, 0), Requested: time.Unix(1699999000, 0), Duration: 1000 * time.Second}

// ParseTemplate parses the template of an event and tries it.
func ParseTemplate(ev Event, text string) (*template.Template, error) {
	t, err := template.New(string(ev)).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, err
	}
	if err := t.Execute(&bytes.Buffer{}, sample); err != nil {
		return nil, err
	}
	return t, nil
}

// Redacted is a URL as logs may show it: its service (the scheme) alone.
// Its host may be the token (pushbullet://TOKEN, ifttt://KEY), and so may
// its user, path and query.
func Redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return "a URL that does not parse"
	}
	return u.Scheme
}

// CheckURL says whether shoutrrr knows the URL's service and accepts its
// settings. The error never repeats the URL.
func CheckURL(raw string) (err error) {
	defer func() {
		// shoutrrr's router has been seen to panic on a URL it cannot
		// convert: a refusal, not a crash.
		if r := recover(); r != nil {
			err = fmt.Errorf("shoutrrr cannot read it (%v)", r)
		}
	}()
	if _, lerr := (&router.ServiceRouter{}).Locate(raw); lerr != nil {
		return errors.New(scrub(lerr.Error(), raw))
	}
	return nil
}

// anyURL is what scrub takes for a URL in a text.
var anyURL = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// scrub removes from a text every URL (down to its scheme) and the parts
// of raw that could be secrets, wherever they appear.
func scrub(text, raw string) string {
	if u, err := url.Parse(raw); err == nil {
		secrets := []string{u.User.String(), u.RawQuery, u.Path, u.Host, u.User.Username()}
		if p, ok := u.User.Password(); ok {
			secrets = append(secrets, p)
		}
		for _, v := range u.Query() {
			secrets = append(secrets, v...)
		}
		for _, s := range secrets {
			if len(s) >= 4 {
				text = strings.ReplaceAll(text, s, "***")
			}
		}
	}
	return anyURL.ReplaceAllStringFunc(text, func(m string) string {
		scheme, _, _ := strings.Cut(m, "://")
		return scheme + "://***"
	})
}

// Settings of a Sender.
type Settings struct {
	URLs      []string
	Templates map[Event]string // an event without a template (or "") sends nothing
	// Attempts per message and URL (default 4), and the first wait between
	// them, doubled at each attempt (default 2s).
	Attempts int
	Retry    time.Duration
	// SendTimeout bounds one attempt (default 30s): shoutrrr's generic
	// webhook has no deadline of its own.
	SendTimeout time.Duration
	// Queue is how many messages may wait for a URL (default 16); more are
	// dropped, and said so.
	Queue int
}

// Sender sends the notifications of one agent.
type Sender struct {
	log       *slog.Logger
	templates map[Event]*template.Template
	targets   []*target
	wg        sync.WaitGroup

	mu     sync.Mutex // guards closed, and the queues' closing
	closed bool
	stop   chan struct{} // closed when Close gives up: retries end
}

type target struct {
	name     string // its place in the list and its service: no secrets
	raw      string
	service  types.Service
	queue    chan string
	settings Settings
	log      *slog.Logger

	failing bool       // the last message could not be delivered (said once)
	dropped bool       // a message was dropped (said once)
	pending chan error // an abandoned attempt, until it ends
	stop    <-chan struct{}
}

// New builds a sender; nil URLs make a sender that sends nothing. A URL
// or a template that cannot be used is an error naming it.
func New(s Settings, log *slog.Logger) (*Sender, error) {
	if s.Attempts <= 0 {
		s.Attempts = 4
	}
	if s.Retry <= 0 {
		s.Retry = 2 * time.Second
	}
	if s.SendTimeout <= 0 {
		s.SendTimeout = 30 * time.Second
	}
	if s.Queue <= 0 {
		s.Queue = 16
	}
	out := &Sender{log: log, templates: map[Event]*template.Template{}, stop: make(chan struct{})}
	for ev, text := range s.Templates {
		if text == "" {
			continue
		}
		t, err := ParseTemplate(ev, text)
		if err != nil {
			return nil, fmt.Errorf("template of %s: %w", ev, err)
		}
		out.templates[ev] = t
	}
	r := &router.ServiceRouter{}
	for i, raw := range s.URLs {
		if err := CheckURL(raw); err != nil {
			return nil, fmt.Errorf("URL %d (%s): %w", i+1, Redacted(raw), err)
		}
		svc, err := r.Locate(raw)
		if err != nil {
			return nil, fmt.Errorf("URL %d (%s): %s", i+1, Redacted(raw), scrub(err.Error(), raw))
		}
		t := &target{name: fmt.Sprintf("URL %d (%s)", i+1, Redacted(raw)), raw: raw, service: svc, queue: make(chan string, s.Queue), settings: s, log: log, stop: out.stop}
		out.targets = append(out.targets, t)
		out.wg.Add(1)
		go func() {
			defer out.wg.Done()
			t.run()
		}()
	}
	return out, nil
}

// Notify renders the event's message and queues it for every URL. It
// never blocks.
func (s *Sender) Notify(d Data) {
	if s == nil || len(s.targets) == 0 {
		return
	}
	t := s.templates[d.Event]
	if t == nil {
		return
	}
	var b bytes.Buffer
	if err := t.Execute(&b, d); err != nil {
		s.log.Warn("notification not sent: its template failed", "event", d.Event, "err", err)
		return
	}
	msg := b.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.log.Warn("notification not sent: the agent is stopping", "event", d.Event)
		return
	}
	for _, t := range s.targets {
		select {
		case t.queue <- msg:
		default:
			if !t.dropped { // said once: a URL that is down drops many
				s.log.Warn("notification dropped: too many wait for this URL; later drops are not logged", "event", d.Event, "url", t.name)
				t.dropped = true
			}
		}
	}
}

// Close sends what is queued, waiting at most timeout; what is left is
// logged and dropped.
func (s *Sender) Close(timeout time.Duration) {
	if s == nil {
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for _, t := range s.targets {
		close(t.queue)
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(timeout):
		left := 0
		for _, t := range s.targets {
			left += len(t.queue)
		}
		s.log.Warn("notifications not all sent before the agent exits", "waited", timeout, "queued", left)
		close(s.stop)
	}
}

func (t *target) run() {
	for msg := range t.queue {
		select {
		case <-t.stop:
			return
		default:
		}
		t.deliver(msg)
	}
}

// deliver tries one message up to Attempts times, waiting Retry, then
// twice as long, between attempts.
func (t *target) deliver(msg string) {
	wait := t.settings.Retry
	var err error
	for attempt := 1; attempt <= t.settings.Attempts; attempt++ {
		if err = t.send(msg); err == nil {
			if t.failing {
				t.log.Info("notifications are delivered again", "url", t.name)
				t.failing = false
			}
			return
		}
		if attempt < t.settings.Attempts {
			select {
			case <-time.After(wait):
			case <-t.stop:
				return
			}
			wait *= 2
		}
	}
	if !t.failing {
		t.log.Warn("notification not delivered; later failures to this URL are not logged until one gets through",
			"url", t.name, "attempts", t.settings.Attempts, "err", scrub(err.Error(), t.raw))
		t.failing = true
	}
}

// send makes one attempt, bounded by SendTimeout. An attempt that outlives
// it is abandoned (shoutrrr's services take no context), and the next
// one first waits for it to end: a URL that hangs holds at most one.
func (t *target) send(msg string) error {
	if t.pending != nil {
		select {
		case <-t.pending:
			t.pending = nil
		case <-time.After(t.settings.SendTimeout):
			return fmt.Errorf("an earlier attempt still has no answer after %s", 2*t.settings.SendTimeout)
		}
	}
	done := make(chan error, 1)
	go func() { done <- t.service.Send(msg, &types.Params{}) }()
	select {
	case err := <-done:
		return err
	case <-time.After(t.settings.SendTimeout):
		t.pending = done
		return fmt.Errorf("no answer in %s", t.settings.SendTimeout)
	}
}
