// Package notify sends the agent's notifications through shoutrrr URLs
// (Slack, Teams, mail, a generic webhook...), by the kustodian-notify
// helper: one message per event the agent lived, rendered from a template (Go's template syntax; see template.go).
//
// Sending never blocks the state machine: a message is queued, and each
// URL has its own sender that tries it a bounded number of times. A URL
// that fails is logged once, not at every attempt, and never with its
// secrets.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
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
// settings, as the helper finds. The error never repeats the URL.
func CheckURL(raw string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return runHelper(ctx, raw, "check", strings.NewReader(raw))
}

// anyURL is what scrub takes for a URL in a text.
var anyURL = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>]+`)

// Scrub removes from a text every URL (down to its scheme) and the parts
// of raw that could be secrets, wherever they appear.
func Scrub(text, raw string) string {
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
	templates map[Event]*Template
	targets   []*target
	wg        sync.WaitGroup

	mu     sync.Mutex // guards closed, and the queues' closing
	closed bool
	// ctx ends when Close gives up: retries end, and a helper still
	// sending is stopped.
	ctx    context.Context
	cancel context.CancelFunc
}

type target struct {
	name     string // its place in the list and its service: no secrets
	raw      string
	queue    chan string
	settings Settings
	log      *slog.Logger

	failing bool // the last message could not be delivered (said once)
	dropped bool // a message was dropped (said once)
	ctx     context.Context
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
	out := &Sender{log: log, templates: map[Event]*Template{}}
	out.ctx, out.cancel = context.WithCancel(context.Background())
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
	for i, raw := range s.URLs {
		if err := CheckURL(raw); err != nil {
			return nil, fmt.Errorf("URL %d (%s): %w", i+1, Redacted(raw), err)
		}
		t := &target{name: fmt.Sprintf("URL %d (%s)", i+1, Redacted(raw)), raw: raw, queue: make(chan string, s.Queue), settings: s, log: log, ctx: out.ctx}
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
	msg, err := t.Render(d)
	if err != nil {
		s.log.Warn("notification not sent: its template failed", "event", d.Event, "err", err)
		return
	}
	if strings.TrimSpace(msg) == "" {
		return // a template that says nothing for this event ({{if ...}}) sends nothing
	}
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
		s.cancel()
		// The helpers still sending are stopped now: wait for them, so
		// that none outlives the agent.
		select {
		case <-done:
		case <-time.After(helperWaitDelay + time.Second):
		}
	}
}

func (t *target) run() {
	for msg := range t.queue {
		if t.ctx.Err() != nil {
			return
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
			case <-t.ctx.Done():
				return
			}
			wait *= 2
		}
	}
	if !t.failing {
		t.log.Warn("notification not delivered; later failures to this URL are not logged until one gets through",
			"url", t.name, "attempts", t.settings.Attempts, "err", Scrub(err.Error(), t.raw))
		t.failing = true
	}
}

// send makes one attempt, bounded by SendTimeout: the helper that
// outlives it is stopped.
func (t *target) send(msg string) error {
	ctx, cancel := context.WithTimeout(t.ctx, t.settings.SendTimeout)
	defer cancel()
	body, err := json.Marshal(Request{URL: t.raw, Message: msg})
	if err != nil {
		return err
	}
	err = runHelper(ctx, t.raw, "send", bytes.NewReader(body))
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("no answer in %s", t.settings.SendTimeout)
	}
	return err
}

// Request is what the helper is asked to send.
type Request struct {
	URL     string `json:"url"`
	Message string `json:"message"`
}

// Helper is the kustodian-notify program, which talks to shoutrrr: by
// default the one next to this program. The agent does not link shoutrrr
// itself (see the package shoutrrr).
var Helper = helperPath()

func helperPath() string {
	exe, err := os.Executable()
	if err != nil {
		return "kustodian-notify"
	}
	return filepath.Join(filepath.Dir(exe), "kustodian-notify")
}

// helperWaitDelay is how long a stopped helper has to exit before its
// pipes are closed on it.
const helperWaitDelay = 2 * time.Second

// runHelper runs the helper's op with stdin; its error is its last line
// on standard error, scrubbed of raw's secrets once more.
func runHelper(ctx context.Context, raw, op string, stdin io.Reader) error {
	cmd := exec.CommandContext(ctx, Helper, op)
	cmd.Stdin = stdin
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.WaitDelay = helperWaitDelay
	err := cmd.Run()
	if err == nil {
		return nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("the notification helper %s is missing; it is installed with kustodian, next to it", Helper)
	}
	msg := strings.TrimSpace(stderr.String())
	if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
		msg = msg[i+1:]
	}
	if msg == "" {
		msg = fmt.Sprintf("kustodian-notify %s: %v", op, err)
	}
	return errors.New(Scrub(msg, raw))
}
