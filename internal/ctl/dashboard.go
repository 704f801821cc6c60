package ctl

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/kustodian/kustodian/internal/history"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/nodemarks"
	"github.com/kustodian/kustodian/internal/picture"
	"github.com/kustodian/kustodian/internal/status"
)

// DefaultDashboardAddress is where the dashboard listens unless told.
const DefaultDashboardAddress = "127.0.0.1:8642"

func newDashboardCommand(o *options) *cobra.Command {
	var address string
	var since time.Duration
	cmd := &cobra.Command{
		Use:   "dashboard [--address 127.0.0.1:8642] [--since 6h]",
		Short: "Serve a live, read-only timeline of the namespace's maintenances on a local web page",
		Long: `dashboard serves a web page with the timeline -o html draws: a row per node in
maintenance, waiting, or whose maintenance ended within --since, its predicted
bar (the plan's predictor) above what happened (its history, then its state
now), the windows of the policy most nodes fall under, and the summary. It
follows watches of the Leases, the Nodes, the control ConfigMap and Kured's
DaemonSet, as status --watch does, and the page updates itself at each change.
Over several clusters (--context A,B, --all-contexts, --fleet FILE) the page
has a section per cluster; one that cannot be read says so and is tried again
every 10 s.

It reads with your kubeconfig and writes nothing; the page holds no
credentials. It listens on the loopback address unless --address says
otherwise (then anyone who reaches that address sees what your kubeconfig
sees: it says so), and on loopback it answers only requests addressed to
127.0.0.1, localhost or [::1] (a page elsewhere cannot read it through a name
of its own).`,
		Example: `  kustodian-ctl dashboard
  kustodian-ctl dashboard --address 127.0.0.1:9000 --since 24h
  kustodian-ctl dashboard --fleet europe.yaml`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return fmt.Errorf("--address %q: want HOST:PORT, as 127.0.0.1:8642", address)
			}
			loopback := isLoopback(host)
			ctx := cmd.Context()
			var feeds []*feed
			what := "namespace " + o.namespace()
			if o.multi() {
				ts, _, err := o.targets()
				if err != nil {
					return err
				}
				for _, t := range ts {
					feeds = append(feeds, &feed{name: t.context, ring: t.ring, o: t.o})
				}
				what = fmt.Sprintf("namespace %s in %d clusters", o.namespace(), len(ts))
			} else {
				// One cluster: it must answer now.
				r, err := o.reader()
				if err != nil {
					return err
				}
				current, changes, err := followStatus(ctx, r)
				if err != nil || current == nil {
					return err
				}
				feeds = []*feed{{current: current, changes: changes}}
			}
			ln, err := net.Listen("tcp", address)
			if err != nil {
				return fmt.Errorf("--address %s: %w", address, err)
			}
			d := newDashboard(feeds, since, loopback)
			d.start(ctx)
			srv := &http.Server{Handler: d, ReadHeaderTimeout: 10 * time.Second}
			if !loopback {
				fmt.Fprintf(o.streams.ErrOut, "warning: --address %s is not a loopback address: anyone who reaches it sees, read-only, what your kubeconfig sees of %s\n", address, what)
			}
			fmt.Fprintf(o.streams.Out, "the dashboard of %s: http://%s/ (read-only; Ctrl-C ends it)\n", what, ln.Addr())
			go func() {
				<-ctx.Done()
				sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_ = srv.Shutdown(sctx)
			}()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return err
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&address, "address", DefaultDashboardAddress, "where to serve the page: HOST:PORT (a loopback address unless you mean others to see it)")
	cmd.Flags().DurationVar(&since, "since", 6*time.Hour, "show the maintenances that ended within this long")
	return manyClusters(cmd)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// dashboard serves the page, its live part and the events that say it
// changed: a section per cluster over several.
type dashboard struct {
	feeds    []*feed
	since    time.Duration
	loopback bool

	mu      sync.Mutex
	version int
	changed chan struct{} // closed at the next change
}

// feed is one cluster's status as its watches keep it: current, once they
// started; err, why they have not (yet).
type feed struct {
	name, ring string
	o          *options // nil: started already (one cluster)

	mu      sync.Mutex
	current func() status.MaintenanceStatus
	changes <-chan struct{}
	err     error
}

func newDashboard(feeds []*feed, since time.Duration, loopback bool) *dashboard {
	return &dashboard{feeds: feeds, since: since, loopback: loopback, changed: make(chan struct{})}
}

// feedRetry is how soon a cluster whose watches could not start is tried
// again.
var feedRetry = 10 * time.Second

// start follows every feed: one started already, or each cluster's, tried
// until its watches start.
func (d *dashboard) start(ctx context.Context) {
	for _, f := range d.feeds {
		go func() {
			for f.o != nil {
				r, err := f.o.reader()
				var current func() status.MaintenanceStatus
				var changes <-chan struct{}
				if err == nil {
					current, changes, err = followStatus(ctx, r)
				}
				if ctx.Err() != nil {
					return
				}
				f.mu.Lock()
				f.current, f.changes, f.err = current, changes, err
				f.mu.Unlock()
				d.bump()
				if err == nil {
					break
				}
				select {
				case <-ctx.Done():
					return
				case <-time.After(feedRetry):
				}
			}
			d.follow(ctx, f.changes)
		}()
	}
}

// follow counts the changes a feed's watches report.
func (d *dashboard) follow(ctx context.Context, changes <-chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-changes:
		}
		d.bump()
	}
}

// bump says a change to the pages open.
func (d *dashboard) bump() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.version++
	close(d.changed)
	d.changed = make(chan struct{})
}

// liveScript replaces the page's live part at each change: the events
// name the version; the part is fetched again.
const liveScript = `<script nonce="%s">
new EventSource("events").onmessage = function () {
  fetch("live", {cache: "no-store"}).then(function (r) { return r.text(); })
    .then(function (t) { document.getElementById("live").innerHTML = t; });
};
</script>
`

func (d *dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "read-only: GET only", http.StatusMethodNotAllowed)
		return
	}
	if d.loopback && !loopbackHost(r.Host) {
		http.Error(w, "this dashboard answers only requests to 127.0.0.1, localhost or [::1]", http.StatusMisdirectedRequest)
		return
	}
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	switch r.URL.Path {
	case "/":
		nonce := make([]byte, 16)
		_, _ = rand.Read(nonce)
		n := base64.StdEncoding.EncodeToString(nonce)
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'nonce-"+n+"'; connect-src 'self'")
		h.Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, picture.PageOf(d.title(), d.body(), fmt.Sprintf(liveScript, n)))
	case "/live":
		h.Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, d.body())
	case "/events":
		d.events(w, r)
	default:
		http.NotFound(w, r)
	}
}

// loopbackHost: a request's Host names the loopback (against DNS
// rebinding: a name of an attacker's that resolves to 127.0.0.1 is not).
func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}

// events sends the version at each change (server-sent events), and a
// comment every 15 s so that proxies keep the connection.
func (d *dashboard) events(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "no streaming", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	d.mu.Lock()
	changed := d.changed // from the moment the stream opens
	d.mu.Unlock()
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
			fmt.Fprint(w, ": still here\n\n")
		case <-changed:
			d.mu.Lock()
			v := d.version
			changed = d.changed
			d.mu.Unlock()
			fmt.Fprintf(w, "data: %s\n\n", strconv.Itoa(v))
		}
		flusher.Flush()
	}
}

// title is the page's title.
func (d *dashboard) title() string {
	if len(d.feeds) == 1 && d.feeds[0].name == "" {
		return "Kustodian"
	}
	return fmt.Sprintf("Kustodian: %d clusters", len(d.feeds))
}

// body is the page's live part: the one cluster's chart, or a section per
// cluster (its chart, or why it cannot be shown).
func (d *dashboard) body() string {
	var b strings.Builder
	for _, f := range d.feeds {
		f.mu.Lock()
		current, err := f.current, f.err
		f.mu.Unlock()
		var c picture.Chart
		if current != nil {
			c = liveChart(current(), d.since)
		}
		if f.name == "" {
			b.WriteString(picture.Body(c))
			continue
		}
		heading := "cluster " + f.name
		if f.ring != "" {
			heading += " (ring " + f.ring + ")"
		}
		switch {
		case current != nil:
			c.Title = heading + ": " + strings.TrimPrefix(c.Title, "Kustodian: ")
			b.WriteString(picture.Section(f.name, c, ""))
		case err != nil:
			b.WriteString(picture.Section(f.name, picture.Chart{Title: heading}, notRead(err)+"; tried again every "+feedRetry.String()))
		default:
			b.WriteString(picture.Section(f.name, picture.Chart{Title: heading}, "being read"))
		}
	}
	return b.String()
}

// liveChart draws a status: each node that is not Idle (what it did so
// far and its state now, its predicted maintenance) and each whose
// maintenance ended within since (its history).
func liveChart(s status.MaintenanceStatus, since time.Duration) picture.Chart {
	now := s.Time
	in := s.Inputs()
	c := picture.Chart{Title: "Kustodian: namespace " + s.Namespace, Now: now}
	c.Summary = append(c.Summary, progressWords(s, rolloutStart(s)))
	if s.Paused {
		c.Summary = append(c.Summary, "paused: "+orDash(s.PausedReason))
	}
	from := now.Add(-since)
	rows := map[string]*picture.Row{}
	row := func(name string) *picture.Row {
		if rows[name] == nil {
			rows[name] = &picture.Row{Label: name}
		}
		return rows[name]
	}
	for _, n := range in.Nodes {
		if _, ok := n.Annotations[nodemarks.AnnotationQuarantined]; ok {
			row(n.Name).Quarantined = true
		}
		entries, _ := history.Parse(n.Annotations[history.Annotation])
		for _, e := range entries {
			if e.Ended.Before(from) {
				continue
			}
			r := row(n.Name)
			r.Actual = append(r.Actual, entrySpans(e)...)
			r.Failed = e.Result == history.Failed
		}
	}
	f := s.Forecast()
	counted := map[string]int{}
	for _, n := range s.Nodes {
		if n.State == lock.Idle {
			continue
		}
		r := row(n.Name)
		r.Actual = append(r.Actual, nowSpans(n, now)...)
		r.Failed = n.State == lock.Failed
		r.Note = status.Printable(string(n.State) + ": " + n.Message)
		if fn, ok := f.Nodes[n.Name]; ok && fn.Unplaced == "" && !fn.Entry.Stuck {
			r.Predicted = []picture.Span{{Phase: picture.Maintenance, From: fn.Entry.Start, To: fn.Entry.End}}
			r.Late = fn.Entry.Overdue
		}
		counted[n.Policy]++
	}
	names := make([]string, 0, len(rows))
	for name := range rows {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		c.Rows = append(c.Rows, *rows[name])
	}
	if len(c.Rows) == 0 {
		c.Summary = append(c.Summary, fmt.Sprintf("No node is in maintenance or waiting, and none ended one in the last %s.", since))
	}
	c.Windows = windowsOf(c, in.Policies, counted)
	return c
}

// nowSpans are what a node in maintenance did so far: waiting from its
// request to its state's start, then its state until now.
func nowSpans(n status.Node, now time.Time) []picture.Span {
	since := now
	if n.Since != nil {
		since = *n.Since
	}
	var out []picture.Span
	if n.Requested != nil && n.Requested.Before(since) && n.State != lock.Waiting {
		out = append(out, picture.Span{Phase: picture.Waiting, From: *n.Requested, To: since})
	}
	phase := picture.Maintenance
	switch n.State {
	case lock.Waiting:
		if n.Requested != nil {
			since = *n.Requested
		}
		phase = picture.Waiting
	case lock.Draining:
		phase = picture.Draining
	case lock.Rebooting:
		phase = picture.Rebooting
	}
	return append(out, picture.Span{Phase: phase, From: since, To: now})
}
