package lock

import (
	"strconv"
	"time"
	"unicode/utf8"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// State is a node's maintenance state (docs/design.md, "States").
type State string

// The states of the agent's state machine.
const (
	Idle          State = "Idle"
	Waiting       State = "Waiting"
	Draining      State = "Draining"
	InMaintenance State = "InMaintenance"
	Rebooting     State = "Rebooting"
	Completing    State = "Completing"
	Failed        State = "Failed"
)

// Annotations and labels of the protocol (docs/design.md, "Cluster objects").
const (
	AnnotationState     = "kustodian.io/state"
	AnnotationSince     = "kustodian.io/state-since"
	AnnotationReason    = "kustodian.io/reason"
	AnnotationRequestID = "kustodian.io/request-id"
	AnnotationMessage   = "kustodian.io/message"
	AnnotationGroup     = "kustodian.io/group"
	AnnotationPriority  = "kustodian.io/priority"
	// AnnotationQueueKey keeps the resourceVersion at which the record was
	// created: the order in which requests reached the API server, which is
	// the queue's FIFO order (see Queue).
	AnnotationQueueKey = "kustodian.io/queue-key"
	// AnnotationReleasedRequest names the request whose lock an admin
	// released (kustodian-ctl release): the agent records Failed and does
	// not take the lock again for it; a new request starts over.
	AnnotationReleasedRequest = "kustodian.io/released-request"
	// AnnotationAfterFailure, on a Completing record, says the maintenance
	// it ends failed (and was repaired): it is no success.
	AnnotationAfterFailure = "kustodian.io/after-failure"
	// AnnotationByAdmin says an admin wrote the record last (kustodian-ctl
	// release), not its agent.
	AnnotationByAdmin = "kustodian.io/by-admin"
	// AnnotationBlocked, when set on a Waiting record, says why this node's
	// own gates are closed: it stays listed but is not eligible for a grant.
	AnnotationBlocked = "kustodian.io/blocked"
	// AnnotationGates, on a Waiting record, is the verdict of each gate of
	// the node's policy (JSON), for kustodian-ctl status NODE.
	AnnotationGates = "kustodian.io/gates"
	// AnnotationSilence is the node's silence in Alertmanager while it is
	// in maintenance (spec.alertmanager.silence): "ID until TIME", or
	// "failed: WHY" while the agent retries.
	AnnotationSilence = "kustodian.io/silence"
	// AnnotationBlockedReported marks a Waiting record whose agent emitted
	// MaintenanceBlocked (health.blockedAfter), so that it does so once.
	AnnotationBlockedReported = "kustodian.io/blocked-reported"
	// AnnotationReleasedAt, on a lock, is when its last holder released it:
	// the policy's spacing counts from there.
	AnnotationReleasedAt = "kustodian.io/released-at"
	// AnnotationDisrupted, on a lock, lists the controllers (kind/ns/name)
	// whose pods its holder's drain evicted; health.workloadsRecovered waits
	// for them.
	AnnotationDisrupted = "kustodian.io/disrupted"
	// AnnotationHold, on a Node, holds it Waiting with its value as the
	// reason (kustodian-ctl pause NODE).
	AnnotationHold = "kustodian.io/hold"

	// LabelState, on the Node, is its maintenance state while not Idle.
	LabelState = "kustodian.io/state"
	// AnnotationCordoned, on the Node, says Kustodian cordoned it, so
	// Kustodian uncordons it afterwards. A node cordoned without it was
	// cordoned by someone else and stays cordoned.
	AnnotationCordoned = "kustodian.io/cordoned"

	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "kustodian"
)

// Record is a node's published maintenance state, stored as the Lease
// node-<node>: holderIdentity is the node, acquireTime when the request was
// first seen (the queue's FIFO key), renewTime the agent's heartbeat.
type Record struct {
	Node      string
	State     State
	Since     time.Time
	Reason    string
	Message   string
	RequestID string
	// Policy and Group are the node's group (see GroupRef).
	Policy   string
	Group    string
	Priority int
	// Blocked says which of the node's own gates is closed (its window,
	// its hold, its pods, its command): the others pass it in the queue.
	// "" when none is (OwnGateClosed).
	Blocked string
	// Gates is the JSON verdict of each gate (AnnotationGates).
	Gates           string
	BlockedReported bool
	// QueueKey orders the queue: the resourceVersion of the record's
	// creation. Until the agent's first update stores it in
	// AnnotationQueueKey, the record's own resourceVersion is that version.
	QueueKey string
	// ReleasedRequest: see AnnotationReleasedRequest.
	ReleasedRequest string
	// AfterFailure and ByAdmin: see AnnotationAfterFailure and
	// AnnotationByAdmin.
	AfterFailure bool
	ByAdmin      bool
	// Silence: see AnnotationSilence.
	Silence   string
	Requested time.Time
	Heartbeat time.Time
}

// OwnGateClosed reports whether one of the node's own gates holds it
// (Blocked): it is passed in the queue until the gate opens.
func (r Record) OwnGateClosed() bool { return r.Blocked != "" }

// RecordFromLease reads a node record.
func RecordFromLease(l *coordv1.Lease) Record {
	a := l.Annotations
	r := Record{
		State:     State(a[AnnotationState]),
		Reason:    a[AnnotationReason],
		Message:   a[AnnotationMessage],
		RequestID: a[AnnotationRequestID],
		Policy:    a[AnnotationPolicy],
		Group:     a[AnnotationGroup],
		Blocked:   a[AnnotationBlocked],
		Gates:     a[AnnotationGates],
		Silence:   a[AnnotationSilence],
		QueueKey:  a[AnnotationQueueKey],

		BlockedReported: a[AnnotationBlockedReported] == "true",
		AfterFailure:    a[AnnotationAfterFailure] == "true",
		ByAdmin:         a[AnnotationByAdmin] == "true",

		ReleasedRequest: a[AnnotationReleasedRequest],
	}
	if r.QueueKey == "" {
		r.QueueKey = l.ResourceVersion
	}
	if r.Policy == "" && (r.Group == "" || r.Group == DefaultGroup.Policy) {
		r.Policy, r.Group = DefaultGroup.Policy, ""
	}
	if l.Spec.HolderIdentity != nil {
		r.Node = *l.Spec.HolderIdentity
	}
	if r.Node == "" {
		r.Node = NodeOfRecord(l.Name)
	}
	if t, err := time.Parse(time.RFC3339, a[AnnotationSince]); err == nil {
		r.Since = t
	}
	if p, err := strconv.Atoi(a[AnnotationPriority]); err == nil {
		r.Priority = p
	}
	if l.Spec.AcquireTime != nil {
		r.Requested = l.Spec.AcquireTime.Time
	}
	if l.Spec.RenewTime != nil {
		r.Heartbeat = l.Spec.RenewTime.Time
	}
	return r
}

// ApplyTo writes the record into a Lease (its name and namespace are the
// caller's), keeping the Lease's other annotations.
func (r Record) ApplyTo(l *coordv1.Lease) {
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[LabelManagedBy] = ManagedBy
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	set := func(k, v string) {
		if v == "" {
			delete(l.Annotations, k)
			return
		}
		l.Annotations[k] = v
	}
	MarkFormat(l)
	set(AnnotationState, string(r.State))
	since := ""
	if !r.Since.IsZero() {
		since = r.Since.UTC().Format(time.RFC3339)
	}
	set(AnnotationSince, since)
	set(AnnotationReason, Clip(r.Reason, MaxText))
	set(AnnotationMessage, Clip(r.Message, MaxText))
	set(AnnotationRequestID, Clip(r.RequestID, MaxText))
	set(AnnotationPolicy, r.Policy)
	set(AnnotationGroup, r.Group)
	set(AnnotationBlocked, Clip(r.Blocked, MaxText))
	gates := r.Gates
	if len(gates) > MaxGates {
		gates = "" // JSON cut short would not read; kustodian-ctl shows none
	}
	set(AnnotationGates, gates)
	set(AnnotationSilence, Clip(r.Silence, MaxText))
	flag := func(k string, v bool) {
		if v {
			set(k, "true")
		} else {
			set(k, "")
		}
	}
	flag(AnnotationBlockedReported, r.BlockedReported)
	flag(AnnotationAfterFailure, r.AfterFailure)
	flag(AnnotationByAdmin, r.ByAdmin)
	set(AnnotationQueueKey, r.QueueKey)
	set(AnnotationReleasedRequest, Clip(r.ReleasedRequest, MaxText))
	prio := ""
	if r.Priority != 0 {
		prio = strconv.Itoa(r.Priority)
	}
	set(AnnotationPriority, prio)
	node := r.Node
	l.Spec.HolderIdentity = &node
	l.Spec.AcquireTime = microTime(r.Requested)
	l.Spec.RenewTime = microTime(r.Heartbeat)
}

// Bounds of what a record keeps (the admission policy refuses Leases with
// more than 16 KiB of annotations): each text, and the gates' JSON.
const (
	MaxText  = 1024
	MaxGates = 8192
)

// Clip cuts s to at most n bytes, on a character boundary, marking the cut
// with "…".
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

func microTime(t time.Time) *metav1.MicroTime {
	if t.IsZero() {
		return nil
	}
	m := metav1.NewMicroTime(t)
	return &m
}

// FailedBefore says whether the maintenance of a node whose record is r
// failed: it is Failed, or Completing after a failure. Its Completing is
// then no success, neither in the history nor in the metrics, the Events or
// the notifications.
func (r Record) FailedBefore() bool {
	return r.State == Failed || (r.State == Completing && r.AfterFailure)
}

// GroupRef is the record's group.
func (r Record) GroupRef() GroupRef { return GroupRef{Policy: r.Policy, Group: r.Group} }

// Live reports whether the record's agent has sent a heartbeat recently
// enough: within staleAfter (four heartbeats by default). A heartbeat from
// further than staleAfter in the future is no heartbeat: hosts' clocks may
// differ by a little, but a record stamped in the year 2999 (a forged one,
// or a host whose clock is far off) must not stay live, and head its
// queue, for ever.
func (r Record) Live(now time.Time, staleAfter time.Duration) bool {
	if r.Heartbeat.IsZero() {
		return false
	}
	age := now.Sub(r.Heartbeat)
	return age <= staleAfter && age >= -staleAfter
}

// CordonMarked reports whether a Node's annotations carry Kustodian's
// cordon mark (AnnotationCordoned "true"): Kustodian cordoned it, and
// uncordons it when its maintenance ends. The one rule for "cordoned by
// us", wherever it is asked.
func CordonMarked(annotations map[string]string) bool {
	return annotations[AnnotationCordoned] == "true"
}
