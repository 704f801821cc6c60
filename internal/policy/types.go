// Package policy owns the MaintenancePolicy (docs/policy.md): its API
// types, which policy a node falls under, which group of that policy it is
// in, and the time windows. Everything here is a pure function of the
// objects and a clock; the agent observes, this package answers.
package policy

import (
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The API group, version and resource of MaintenancePolicy.
const (
	Group    = "kustodian.io"
	Version  = "v1alpha1"
	Kind     = "MaintenancePolicy"
	Resource = "maintenancepolicies"
)

// GVR is where MaintenancePolicies are read and written.
var GVR = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// DefaultName is the built-in policy of nodes no MaintenancePolicy selects;
// no MaintenancePolicy may take this name.
const DefaultName = "default"

// MaintenancePolicy says when, how many at once, and whether nodes may go.
type MaintenancePolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              Spec `json:"spec"`

	// unreadable is why the object could not be decoded.
	unreadable error
}

// Unreadable stands for a MaintenancePolicy that could not be decoded: it
// holds every node, with the reason, until an admin fixes it.
func Unreadable(name string, err error) *MaintenancePolicy {
	p := &MaintenancePolicy{unreadable: err}
	p.Name = name
	return p
}

// Spec is a MaintenancePolicy's spec. The field names are a contract
// (docs/policy.md): add, never rename.
type Spec struct {
	// NodeSelector selects the nodes; empty selects every node.
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	// Precedence decides between policies that select the same node: the
	// highest wins; a tie is an error.
	Precedence int32 `json:"precedence,omitempty"`
	// Concurrency is the number of slots per group (default 1).
	Concurrency int32 `json:"concurrency,omitempty"`
	// GroupBy is a Node label key: one group, with its own slots and queue,
	// per value. Empty: one group.
	GroupBy string `json:"groupBy,omitempty"`
	// Windows are when grants may start; none means always.
	Windows []Window `json:"windows,omitempty"`
	// ExcludeDates (YYYY-MM-DD, in each window's time zone) close the
	// windows on those days.
	ExcludeDates []string `json:"excludeDates,omitempty"`
	// Spacing is the minimum time from a group's last release to its next
	// grant.
	Spacing    *metav1.Duration `json:"spacing,omitempty"`
	Blockers   Blockers         `json:"blockers,omitempty"`
	Health     Health           `json:"health,omitempty"`
	Autoscaler Autoscaler       `json:"autoscaler,omitempty"`
	// Alertmanager is where the agents silence their node's alerts while
	// it is in maintenance, and what blockers.alertmanager asks.
	Alertmanager *Alertmanager `json:"alertmanager,omitempty"`
	// Drain says what happens when a drain reaches the agents'
	// drain.timeout with pods left.
	Drain Drain `json:"drain,omitempty"`
	// Triggers are the maintenances the agents may ask for by themselves.
	Triggers Triggers `json:"triggers,omitempty"`
}

// Triggers are the maintenances the agents may ask for by themselves,
// through the same queue, windows, groups and gates as any other.
type Triggers struct {
	// RebootRequired: an agent whose host needs a reboot (the reboot
	// sentinel, needs-restarting -r, or its rebootRequired.command) asks
	// for a maintenance whose job is the reboot.
	RebootRequired bool `json:"rebootRequired,omitempty"`
}

// Drain escalates a drain that timed out: first by deleting the pods a
// PodDisruptionBudget holds in the namespaces it names, then, if pods are
// still left, by quarantining the node.
type Drain struct {
	Escalate   []DrainEscalation `json:"escalate,omitempty"`
	Quarantine *Quarantine       `json:"quarantine,omitempty"`
}

// EscalateDeletePods deletes, without eviction, the pods that a
// PodDisruptionBudget keeps from being evicted.
const EscalateDeletePods = "deletePods"

// DrainEscalation allows Action for the pods of the namespaces that
// NamespaceSelector selects (an empty selector: every namespace).
type DrainEscalation struct {
	Action            string                `json:"action"`
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector"`
}

// Quarantine gives the lock of a node whose drain timed out back, leaves
// the node cordoned and marked, and lets the next node go; at most
// MaxNodes nodes of the policy at once (default 1): beyond, the node holds
// its lock (Failed), and the policy's rollout stops there.
type Quarantine struct {
	MaxNodes int32 `json:"maxNodes,omitempty"`
}

// QuarantineCap is how many nodes of the policy may be quarantined at once.
func (q *Quarantine) QuarantineCap() int {
	if q == nil || q.MaxNodes < 1 {
		return 1
	}
	return int(q.MaxNodes)
}

// Window is a weekly time window. End before start crosses midnight.
type Window struct {
	Days     []string `json:"days,omitempty"` // Mon..Sun; empty: every day
	Start    string   `json:"start"`          // HH:MM
	End      string   `json:"end"`            // HH:MM; 24:00 is the end of the day
	TimeZone string   `json:"timeZone,omitempty"`
}

// Blockers keep a node from going while they hold.
type Blockers struct {
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
	Prometheus  *Prometheus           `json:"prometheus,omitempty"`
	// Alertmanager blocks on the active alerts of spec.alertmanager that
	// are neither silenced nor inhibited.
	Alertmanager *AlertmanagerBlocker `json:"alertmanager,omitempty"`
}

// AlertmanagerBlocker filters the alerts that block: Alertmanager's own
// matchers (severity="critical"), then Kured's alert name filter.
type AlertmanagerBlocker struct {
	Matchers             []string `json:"matchers,omitempty"`
	AlertFilterRegexp    string   `json:"alertFilterRegexp,omitempty"`
	AlertFilterMatchOnly bool     `json:"alertFilterMatchOnly,omitempty"`
}

// Alertmanager is one Alertmanager and the silence the agents keep in it
// over a node in maintenance. Its URL must be one each host lists in its
// configuration (alertmanager.endpoints), which also says what credentials
// the host sends it: a policy chooses among the hosts' Alertmanagers, it
// never names a file or a new destination.
type Alertmanager struct {
	URL     string   `json:"url"`
	Silence *Silence `json:"silence,omitempty"`
	// Credentials were once read from here; a policy stored before that
	// changed still has them, and Validate refuses it saying where they
	// went.
	Credentials json.RawMessage `json:"credentials,omitempty"`
}

// Silence is the silence over a node in maintenance, from its cordon until
// it is back (or its maintenance failed).
type Silence struct {
	// Matchers are Alertmanager matchers (name="value", name=~"regexp",
	// != and !~), Go templates of .Node, .Policy and .Group; the function
	// regexQuote quotes a value for a regexp matcher.
	Matchers []string `json:"matchers"`
	// Duration bounds the silence: it ends this long after the agent last
	// extended it (default 30m), so it ends on its own when the agent is
	// gone. The agent extends it while the maintenance lasts.
	Duration *metav1.Duration `json:"duration,omitempty"`
	// Link is put in the silence's comment (a Go template of the same
	// fields): a runbook, a dashboard, a ticket.
	Link string `json:"link,omitempty"`
}

// SilenceFields are what a silence's templates may use.
type SilenceFields struct {
	Node, Policy, Group string
}

// DefaultSilenceDuration is a silence's bound when Duration is unset.
const DefaultSilenceDuration = 30 * time.Minute

// SilenceDuration is the silence's bound.
func (s *Silence) SilenceDuration() time.Duration {
	if s == nil || s.Duration == nil || s.Duration.Duration <= 0 {
		return DefaultSilenceDuration
	}
	return s.Duration.Duration
}

// Prometheus blocks on firing alerts (Kured's semantics) or on a non-empty
// instant query result. Its URL must be one each host lists in its
// configuration (prometheus.endpoints).
type Prometheus struct {
	URL                  string `json:"url"`
	AlertFilterRegexp    string `json:"alertFilterRegexp,omitempty"`
	AlertFilterMatchOnly bool   `json:"alertFilterMatchOnly,omitempty"`
	FiringOnly           bool   `json:"firingOnly,omitempty"`
	Query                string `json:"query,omitempty"`
}

// Health gates a grant on the state of the cluster.
type Health struct {
	MaxUnavailable     *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	WorkloadsRecovered bool                `json:"workloadsRecovered,omitempty"`
	BlockedAfter       *metav1.Duration    `json:"blockedAfter,omitempty"`
}

// Autoscaler keeps the cluster autoscaler off nodes in maintenance.
type Autoscaler struct {
	Protect bool `json:"protect,omitempty"`
}

// FromUnstructured decodes a MaintenancePolicy read with a dynamic client.
func FromUnstructured(u *unstructured.Unstructured) (*MaintenancePolicy, error) {
	var p MaintenancePolicy
	b, err := u.MarshalJSON()
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil {
		return nil, fmt.Errorf("MaintenancePolicy %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	return &p, nil
}

// Slots is the number of slots per group.
func (s Spec) Slots() int {
	if s.Concurrency < 1 {
		return 1
	}
	return int(s.Concurrency)
}

// SpacingDuration is Spacing, 0 when unset.
func (s Spec) SpacingDuration() time.Duration {
	if s.Spacing == nil {
		return 0
	}
	return s.Spacing.Duration
}

// BlockedAfterDuration is Health.BlockedAfter, 0 (never) when unset.
func (s Spec) BlockedAfterDuration() time.Duration {
	if s.Health.BlockedAfter == nil {
		return 0
	}
	return s.Health.BlockedAfter.Duration
}
