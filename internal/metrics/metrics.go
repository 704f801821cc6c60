// Package metrics keeps the agent's Prometheus metrics.
//
// The agent exits when its node is Idle, so its metrics must outlive it:
// what they say is kept in the state directory (metrics.json) and carried
// from one run to the next, and written on every change as a
// node_exporter textfile, atomically, so that the last state, the results
// and the timestamps stay scrapeable between maintenances. Counters and
// histograms only grow across runs; timestamps let a scrape that came
// after a fast reboot still see it.
package metrics

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kustodian/kustodian/internal/atomicfile"

	"github.com/kustodian/kustodian/internal/version"
)

// States are the values of kustodian_state's label, all of them present
// (0 or 1) so that a query for one state never finds nothing.
var States = []string{"Idle", "Waiting", "Draining", "InMaintenance", "Rebooting", "Completing", "Failed"}

// Buckets of the duration histograms, in seconds: a wait, a drain or a
// maintenance lasts from seconds to a day.
var Buckets = []float64{1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400}

// Histogram is a duration histogram that can be kept in a file.
type Histogram struct {
	Count   uint64   `json:"count"`
	Sum     float64  `json:"sum"`
	Buckets []uint64 `json:"buckets"` // per bucket of Buckets, not cumulative
}

// Observe adds one duration.
func (h *Histogram) Observe(d time.Duration) {
	s := d.Seconds()
	if len(h.Buckets) != len(Buckets) {
		h.Buckets = make([]uint64, len(Buckets))
	}
	h.Count++
	h.Sum += s
	if i := sort.SearchFloat64s(Buckets, s); i < len(Buckets) {
		h.Buckets[i]++
	}
}

func (h Histogram) cumulative() map[float64]uint64 {
	out := make(map[float64]uint64, len(Buckets))
	var n uint64
	for i, le := range Buckets {
		if i < len(h.Buckets) {
			n += h.Buckets[i]
		}
		out[le] = n
	}
	return out
}

// Data is what the metrics say, and what is kept between runs.
type Data struct {
	State      string    `json:"state"`
	StateSince time.Time `json:"stateSince"`
	Requested  bool      `json:"requested"`
	LockHeld   bool      `json:"lockHeld"`
	// QueuePosition is 1 for the head of the queue, 0 when not waiting.
	QueuePosition int `json:"queuePosition"`
	// Blocked holds each gate of the node's policy with whether it blocks.
	Blocked map[string]bool `json:"blocked,omitempty"`

	Maintenances map[string]uint64 `json:"maintenances,omitempty"` // by result
	Evictions    uint64            `json:"evictions"`
	Reboots      uint64            `json:"reboots"`
	LastSuccess  time.Time         `json:"lastSuccess"`

	Wait        Histogram `json:"wait"`
	Drain       Histogram `json:"drain"`
	Maintenance Histogram `json:"maintenance"`

	// When the current maintenance's drain began and ended (zero when
	// not), kept for its durations across restarts of the agent.
	DrainStarted time.Time `json:"drainStarted"`
	Drained      time.Time `json:"drained"`

	// StepFailures counts the agent's steps that failed in a row, since
	// FailingSince; 0 (and zero) after a step that succeeded.
	StepFailures int       `json:"stepFailures"`
	FailingSince time.Time `json:"failingSince"`

	// Deadlines are the rollouts with a deadline, by name, as this agent
	// last saw them.
	Deadlines map[string]Deadline `json:"deadlines,omitempty"`

	// TokenExpires is when the node's token expires, as last known;
	// TokenRenewals counts its renewals by result.
	TokenExpires  time.Time         `json:"tokenExpires"`
	TokenRenewals map[string]uint64 `json:"tokenRenewals,omitempty"`
}

// Store keeps Data in dir/metrics.json and writes it to the textfile.
type Store struct {
	path     string // metrics.json
	textfile string // "" when none
	now      func() time.Time

	write   sync.Mutex // held across a change and its writes
	mu      sync.Mutex // guards data and updated (Collect reads them)
	data    Data
	updated time.Time
	reg     *prometheus.Registry
}

// Open reads what an earlier run kept in dir. A file that cannot be read
// or decoded is reported and set aside (renamed *.corrupt): metrics never
// stop a maintenance.
func Open(dir, textfile string) (*Store, error) {
	s := &Store{path: filepath.Join(dir, "metrics.json"), textfile: textfile, now: time.Now}
	s.data.State = "Idle"
	b, err := os.ReadFile(s.path)
	var warn error
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		warn = fmt.Errorf("metrics: reading %s: %w; starting from zero", s.path, err)
	default:
		var d Data
		if err := json.Unmarshal(b, &d); err != nil {
			warn = fmt.Errorf("metrics: %s is corrupt (%v); kept as %s.corrupt, starting from zero", s.path, err, s.path)
			_ = os.Rename(s.path, s.path+".corrupt")
		} else {
			s.data = d
		}
	}
	s.reg = prometheus.NewPedanticRegistry()
	if err := s.reg.Register(collector{s}); err != nil {
		return nil, err
	}
	return s, warn
}

// Read reads what the agent last kept in dir, changing nothing (for
// commands that explain the agent's state), and when it was written.
func Read(dir string) (Data, time.Time, error) {
	path := filepath.Join(dir, "metrics.json")
	f, err := os.Open(path)
	if err != nil {
		return Data{}, time.Time{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Data{}, time.Time{}, err
	}
	var d Data
	if err := json.NewDecoder(f).Decode(&d); err != nil {
		return Data{}, time.Time{}, fmt.Errorf("%s: %w", path, err)
	}
	return d, st.ModTime(), nil
}

// Data is a copy of what the metrics say, for reading only: its maps and
// bucket slices are shared with the store.
func (s *Store) Data() Data {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.data // the maps are only read by the caller
}

// Registry is the registry the HTTP endpoint serves.
func (s *Store) Registry() *prometheus.Registry { return s.reg }

// Update changes the data, keeps it, and writes the textfile. The data is
// changed even if it cannot be kept; the error says what was not written.
func (s *Store) Update(change func(d *Data)) error {
	s.write.Lock() // writes in the order of their changes
	defer s.write.Unlock()
	s.mu.Lock()
	change(&s.data)
	s.updated = s.now()
	b, err := json.MarshalIndent(s.data, "", "  ")
	s.mu.Unlock()
	if err != nil {
		return err
	}
	var errs []error
	if err := os.MkdirAll(filepath.Dir(s.path), 0o755); err != nil {
		errs = append(errs, fmt.Errorf("metrics: %w", err))
	} else if err := atomicfile.Replace(s.path, append(b, '\n'), 0o644); err != nil {
		// Not synced: metrics change at every handoff, and a power cut
		// that loses the last of them costs a counter reset (or a file set
		// aside at the next start), which Prometheus handles.
		errs = append(errs, fmt.Errorf("metrics: %w", err))
	}
	if s.textfile != "" {
		if err := prometheus.WriteToTextfile(s.textfile, s.reg); err != nil {
			errs = append(errs, fmt.Errorf("metrics: writing the textfile %s: %w", s.textfile, err))
		}
	}
	return errors.Join(errs...)
}

// Deadline is a rollout's deadline, its predicted end (to the minute) and
// whether it is at risk (its condition AtRisk).
type Deadline struct {
	Deadline     time.Time `json:"deadline"`
	PredictedEnd time.Time `json:"predictedEnd"`
	AtRisk       bool      `json:"atRisk"`
}

// SetState records a transition; the same state again changes nothing.
func (d *Data) SetState(state string, at time.Time) {
	if d.State == state && !d.StateSince.IsZero() {
		return
	}
	d.State, d.StateSince = state, at
}

// Ended counts a maintenance that ended with result (succeeded, failed,
// released), and when it succeeded, its time.
func (d *Data) Ended(result string, at time.Time) {
	if d.Maintenances == nil {
		d.Maintenances = map[string]uint64{}
	}
	d.Maintenances[result]++
	if result == ResultSucceeded {
		d.LastSuccess = at
	}
}

// TokenRenewed counts a renewal of the node's token with result (succeeded,
// failed); expires is when the token now in use expires.
func (d *Data) TokenRenewed(result string, expires time.Time) {
	if d.TokenRenewals == nil {
		d.TokenRenewals = map[string]uint64{}
	}
	d.TokenRenewals[result]++
	d.TokenExpires = expires
}

// Results of a maintenance (and of a token's renewal).
const (
	ResultSucceeded = "succeeded"
	ResultFailed    = "failed"
)

type collector struct{ s *Store }

var (
	descBuild       = prometheus.NewDesc("kustodian_build_info", "The agent's build: 1, with its version, commit and Go version.", []string{"version", "commit", "goversion"}, nil)
	descState       = prometheus.NewDesc("kustodian_state", "The node's maintenance state: 1 for the current one, 0 for the others.", []string{"state"}, nil)
	descStateSince  = prometheus.NewDesc("kustodian_state_since_timestamp_seconds", "When the node entered its current state (Unix time).", nil, nil)
	descRequested   = prometheus.NewDesc("kustodian_maintenance_requested", "1 while a maintenance is requested (the request file exists).", nil, nil)
	descLockHeld    = prometheus.NewDesc("kustodian_lock_held", "1 while the node holds a maintenance lock.", nil, nil)
	descPosition    = prometheus.NewDesc("kustodian_queue_position", "The node's place in its group's queue, 1 for the head; 0 when not waiting.", nil, nil)
	descBlocked     = prometheus.NewDesc("kustodian_gate_blocked", "1 while the gate keeps the node from its turn.", []string{"gate"}, nil)
	descMaint       = prometheus.NewDesc("kustodian_maintenances_total", "Maintenances ended, by result.", []string{"result"}, nil)
	descEvictions   = prometheus.NewDesc("kustodian_evictions_total", "Pods evicted by the node's drains.", nil, nil)
	descReboots     = prometheus.NewDesc("kustodian_reboots_total", "Reboots during maintenances (the agent saw the host go down).", nil, nil)
	descLastSuccess = prometheus.NewDesc("kustodian_last_success_timestamp_seconds", "When the node's last maintenance succeeded (Unix time); 0 if never.", nil, nil)
	descUpdated     = prometheus.NewDesc("kustodian_metrics_updated_timestamp_seconds", "When the agent last wrote these metrics (Unix time): at every change, and every minute while it runs.", nil, nil)
	descWait        = prometheus.NewDesc("kustodian_wait_duration_seconds", "From the request to the lock.", nil, nil)
	descDrain       = prometheus.NewDesc("kustodian_drain_duration_seconds", "From the cordon to the node drained.", nil, nil)
	descMaintenance = prometheus.NewDesc("kustodian_maintenance_duration_seconds", "From the node drained to the request removed.", nil, nil)
	descFailures    = prometheus.NewDesc("kustodian_step_failures", "The agent's steps that failed in a row (0 after one that succeeded): an agent that retries the same failing step says so here.", nil, nil)
	descFailing     = prometheus.NewDesc("kustodian_failing_since_timestamp_seconds", "Since when the agent's steps fail without one succeeding (Unix time); 0 while they succeed.", nil, nil)
	descAtRisk      = prometheus.NewDesc("kustodian_rollout_at_risk", "1 while a rollout's deadline is at risk (its condition AtRisk), as this agent sees it; every agent of the rollout's namespace says it (aggregate with max).", []string{"rollout"}, nil)
	descDeadline    = prometheus.NewDesc("kustodian_rollout_deadline_timestamp_seconds", "A rollout's deadline (Unix time).", []string{"rollout"}, nil)
	descPredicted   = prometheus.NewDesc("kustodian_rollout_predicted_end_timestamp_seconds", "When a rollout with a deadline is predicted to end (Unix time, to the minute).", []string{"rollout"}, nil)
	descTokenExp    = prometheus.NewDesc("kustodian_token_expiry_timestamp_seconds", "When the node's token expires (Unix time); 0 when it does not say. The node renews it when a third of its lifetime is left.", nil, nil)
	descRenewals    = prometheus.NewDesc("kustodian_token_renewals_total", "Renewals of the node's token, by result.", []string{"result"}, nil)
)

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descBuild, descState, descStateSince, descRequested, descLockHeld, descPosition,
		descBlocked, descMaint, descEvictions, descReboots, descLastSuccess, descUpdated, descWait, descDrain, descMaintenance,
		descFailures, descFailing, descAtRisk, descDeadline, descPredicted, descTokenExp, descRenewals} {
		ch <- d
	}
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	c.s.mu.Lock()
	d := c.s.data
	updated := c.s.updated
	blocked := make(map[string]bool, len(d.Blocked))
	for k, v := range d.Blocked {
		blocked[k] = v
	}
	maint := make(map[string]uint64, len(d.Maintenances))
	for k, v := range d.Maintenances {
		maint[k] = v
	}
	deadlines := make(map[string]Deadline, len(d.Deadlines))
	for k, v := range d.Deadlines {
		deadlines[k] = v
	}
	renewals := map[string]uint64{ResultSucceeded: d.TokenRenewals[ResultSucceeded], ResultFailed: d.TokenRenewals[ResultFailed]}
	c.s.mu.Unlock()

	gauge := func(desc *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, v, labels...)
	}
	counter := func(desc *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(descBuild, 1, version.Version, version.Commit, runtime.Version())
	for _, st := range States {
		gauge(descState, b2f(st == d.State), st)
	}
	gauge(descStateSince, unix(d.StateSince))
	gauge(descRequested, b2f(d.Requested))
	gauge(descLockHeld, b2f(d.LockHeld))
	gauge(descPosition, float64(d.QueuePosition))
	for gate, on := range blocked {
		gauge(descBlocked, b2f(on), gate)
	}
	for _, r := range []string{ResultSucceeded, ResultFailed} {
		if _, ok := maint[r]; !ok {
			maint[r] = 0
		}
	}
	for r, n := range maint {
		counter(descMaint, n, r)
	}
	counter(descEvictions, d.Evictions)
	counter(descReboots, d.Reboots)
	gauge(descLastSuccess, unix(d.LastSuccess))
	gauge(descUpdated, unix(updated))
	gauge(descFailures, float64(d.StepFailures))
	gauge(descFailing, unix(d.FailingSince))
	gauge(descTokenExp, unix(d.TokenExpires))
	for r, n := range renewals {
		counter(descRenewals, n, r)
	}
	for name, dl := range deadlines {
		gauge(descAtRisk, b2f(dl.AtRisk), name)
		gauge(descDeadline, unix(dl.Deadline), name)
		gauge(descPredicted, unix(dl.PredictedEnd), name)
	}
	for _, h := range []struct {
		desc *prometheus.Desc
		h    Histogram
	}{{descWait, d.Wait}, {descDrain, d.Drain}, {descMaintenance, d.Maintenance}} {
		ch <- prometheus.MustNewConstHistogram(h.desc, h.h.Count, h.h.Sum, h.h.cumulative())
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func unix(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return math.Round(float64(t.UnixMilli())) / 1000
}
