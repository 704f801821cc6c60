package agent

import (
	"context"
	"net/http"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"

	"github.com/kustodian/kustodian/internal/decide"
	"github.com/kustodian/kustodian/internal/jobs"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/login1"
	"github.com/kustodian/kustodian/internal/metrics"
)

// The parts of an Agent, each the state of one concern.

// lockSide is the lock protocol's objects on the API server (store) and
// the agent's view of them, overlaid with its own writes.
type lockSide struct {
	store      lockStore
	view       *leaseView
	node       string
	staleAfter time.Duration
	lastRenew  time.Time // of the held locks, when they have a TTL
	holders    map[string]holderCheck
	// sawOwn is told of this node's own writes of a queue Lease, as its
	// watch would tell of them (a node asleep far back has none).
	sawOwn func(*coordv1.Lease)
}

// informed are the informers' stores of the last start, as the agent
// reads them.
type informed struct {
	// The clients the informers watch with, beside the Agent's.
	dyn  dynamic.Interface
	meta metadata.Interface

	control     cache.Store
	nodes       cache.Store
	kured       cache.Store // nil when kured.enabled is false
	policies    cache.Store // nil when the MaintenancePolicy CRD is not installed
	policyCache policyCache
	pods        cache.Store        // the pods on this node
	requests    cache.Store        // this node's MaintenanceRequests; nil when not installed
	stop        context.CancelFunc // ends the informers of the last start
}

// queueView is the agent's view of its group's queue: when it began to
// watch it, when it saw each queue Lease change, and its own summary of
// the queue (one LIST, when it joined or made the summary).
type queueView struct {
	watching  time.Time
	mu        sync.Mutex           // guards seen, changed and unreadable: informer handlers and look-ups write them
	seen      map[string]time.Time // any change of a queue Lease
	changed   map[string]time.Time // a change of its summary (not a renewal)
	last      map[string]seenQueue // the version and summary last seen
	parsed    map[string]parsedQueue
	mine      *lock.Summary
	mineGroup lock.GroupRef
	jitter    float64   // decide.Params.Jitter
	nearBand  int       // decide.RecordHeartbeat's (decide.NearBand; the simulation's own)
	renewAt   time.Time // when a node renewing every other heartbeat renews next
	far       farSide   // asleep far back in a fast queue (farback.go)
	// unreadable is the record of its group that the last LIST could not
	// read (in a newer format): it keeps the node out of its turn until a
	// LIST finds none (listAgain).
	unreadable *unreadableRecord
}

// unreadableRecord is a record that a LIST of group's records found in a
// newer format, at at.
type unreadableRecord struct {
	lease, why string
	group      lock.GroupRef
	at         time.Time
}

// seenQueue is a queue Lease as last seen.
type seenQueue struct{ rv, summary string }

// parsedQueue is a queue Lease's summary as last read: a waiting agent
// reads the summaries at every step, and at fleet size one changes far
// less often than that.
type parsedQueue struct {
	text, by string
	summary  lock.Summary
	err      error
}

// summaryOf reads l's summary, parsing it again only when its text
// changed. Its caller holds mu.
func (q *queueView) summaryOf(l *coordv1.Lease) (lock.Summary, error) {
	text, by := l.Annotations[lock.AnnotationQueue]+"\x00"+l.Annotations[lock.AnnotationFormat], l.Annotations[lock.AnnotationQueueBy]
	if p, ok := q.parsed[l.Name]; ok && p.text == text && p.by == by {
		return p.summary, p.err
	}
	s, err := lock.SummaryFromLease(l)
	if q.parsed == nil {
		q.parsed = map[string]parsedQueue{}
	}
	q.parsed[l.Name] = parsedQueue{text: text, by: by, summary: s, err: err}
	return s, err
}

// drainSide is the drain: what drains (seam), the run going on, and its
// escalation; mu guards run and the escalation, which the drain's
// goroutine reads.
type drainSide struct {
	seam nodeDrainer
	mu   sync.Mutex
	run  *drainRun
	escalationState
}

// evictSide is whom the drain evicts as: client is the kubelet's identity
// when it is not the agent's own (drain.kubeletKubeconfig; nil
// otherwise), and config its kubeconfig.
type evictSide struct {
	client kubernetes.Interface
	config string
}

// markSide is what the agent says of itself on its Node (markNode):
// evictions, what checkEvictor found for the label
// kustodian.io/kubelet-evictions ("ready", "unready", or "": not known,
// the label is left), and version, this agent's version for the
// annotation kustodian.io/agent-version. Either is "" once an admission
// policy older than the agent refused it.
type markSide struct {
	evictions string
	version   string
}

// hostSide is logind: reboot reboots the host (nil without logind); block
// keeps a reboot from cutting a drain or a completion in half, for anyone
// who honours inhibitors; delay gives the agent the time to record
// Rebooting when a shutdown begins; shuttingDown: the host is going down,
// take no more steps.
type hostSide struct {
	login1       *login1.Manager
	reboot       rebooter
	block, delay *login1.Lock
	shuttingDown bool
}

// jobsSide is the managed jobs: where they are kept, what runs them, when
// the current job's next step is due by the clock (a retry; zero: at the
// next change), the job run (its unit) the agent last took a reboot
// request for, and the job it last ended, for the history of the
// maintenance that ends with it.
type jobsSide struct {
	store       jobs.Store
	runner      jobRunner
	wakeAt      time.Time
	rebootAsked string
	ended       *jobs.Job
}

// kuredSide is Kured's lock (locker nil when kured.enabled is false), in
// the DaemonSet ds names, honoured under the annotations keys
// (kured.lockAnnotations).
type kuredSide struct {
	locker kuredLocker
	keys   []string
	ds     cache.ObjectName
}

// gateSide is the last results of the gates a decision asked for, with
// when they were got (decide says when to ask again), and the client that
// asks a host's servers.
type gateSide struct {
	cluster *decide.ClusterFacts
	command *decide.CommandResult
	http    *http.Client
}

// metricSide is the metrics in the state directory (store nil when it
// cannot hold them), what they last said (transitionMetrics), and the last
// failure to write them, said once.
type metricSide struct {
	store *metrics.Store
	key   string
	err   string
}

// reportedSide is what the agent last said outside its record: systemd's
// status line (and the host's warning added to it); the state and message
// of the Node conditions last written (until the cache shows them), and
// whether the installation gives no right to write them (said once); what
// it says of itself on its Node (marks); the token in use and what was
// said of it.
type reportedSide struct {
	marks             markSide
	status            string
	hostWarning       string // Options.HostWarning
	conditions        string
	conditionsRefused bool
	token             tokenSide
	request           requestSide // the MaintenanceRequest worked on
}

// signals wake the Run loop: wake, a change it must look at; watchBroken,
// an informer's watch failed (watchError), or a request could not reach
// the API server (ConnWatch).
type signals struct {
	wake        chan struct{}
	watchBroken chan struct{}
}

// forgetCycle forgets, at Idle, what the drain of the cycle that ended
// left: the pods deleted past their budget (in the history now) and the
// request it was quarantined for.
func (d *drainSide) forgetCycle() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.escalated, d.quarantined = nil, ""
}
