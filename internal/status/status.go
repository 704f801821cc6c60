// Package status reads the state of maintenance in a cluster, for
// kustodian-ctl: who holds which lock, who waits in which order, what each
// node is doing. Build is a pure function of the objects; Read fetches them
// with one LIST each.
package status

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kustodian/kustodian/internal/kured/kuredapi"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/nodemarks"
	"github.com/kustodian/kustodian/internal/policy"
)

// APIVersion and Kind of the documented output of `status -o json|yaml`.
// Fields are added, never renamed.
const (
	APIVersion = "kustodian.io/v1alpha1"
	Kind       = "MaintenanceStatus"
)

// MaintenanceStatus is the state of maintenance in one namespace.
type MaintenanceStatus struct {
	APIVersion   string    `json:"apiVersion"`
	Kind         string    `json:"kind"`
	Namespace    string    `json:"namespace"`
	Time         time.Time `json:"time"`
	Paused       bool      `json:"paused"`
	PausedReason string    `json:"pausedReason,omitempty"`
	Locks        []Lock    `json:"locks"`
	// Kured is Kured's lock when Kured is installed.
	Kured *KuredLock `json:"kured,omitempty"`
	Nodes []Node     `json:"nodes"`

	// inputs are what it was built from, for Forecast and Progress.
	inputs *Inputs
}

// Lock is one lock Lease.
type Lock struct {
	Name   string     `json:"name"`
	Group  string     `json:"group"`
	Holder string     `json:"holder"` // "" when free
	Since  *time.Time `json:"since,omitempty"`
}

// KuredLock is Kured's lock.
type KuredLock struct {
	Holders   []string `json:"holders"`
	MaxOwners int      `json:"maxOwners,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// Node is one node's maintenance state.
type Node struct {
	Name  string     `json:"name"`
	State lock.State `json:"state"`
	Since *time.Time `json:"since,omitempty"`
	// QueuePosition is the 1-based place in the grant order of the node's
	// group (lock.GrantOrder: the live waiting nodes whose own gates are
	// open); 0 when not waiting, blocked by its own gate, or silent.
	QueuePosition int    `json:"queuePosition"`
	Reason        string `json:"reason,omitempty"`
	Message       string `json:"message,omitempty"`
	RequestID     string `json:"requestID,omitempty"`
	Group         string `json:"group,omitempty"`
	// HeartbeatAge is the seconds since the agent last renewed its record;
	// absent for nodes without a record.
	HeartbeatAge *float64 `json:"heartbeatAge,omitempty"`
	// Live: the agent's heartbeat is recent.
	Live bool `json:"live"`
	// Requested is when the agent first saw the request.
	Requested *time.Time `json:"requested,omitempty"`
	// CordonedBy is "kustodian", "other" (an admin, another tool) or "".
	CordonedBy string `json:"cordonedBy,omitempty"`
	// Conditions are the Node's maintenance conditions that are True
	// (MaintenancePlanned, DrainInProgress, Drained, MaintenanceInProgress).
	Conditions []string `json:"conditions,omitempty"`
	// HasNode is false for a record whose Node object is gone.
	HasNode bool `json:"hasNode"`
	// Policy is the MaintenancePolicy the node falls under ("default": none).
	Policy string `json:"policy,omitempty"`
	// Blocked says why a waiting node's own gates are closed.
	Blocked string `json:"blocked,omitempty"`
	// Gates are the verdicts of the waiting node's gates, as its agent
	// last saw them.
	Gates []Gate `json:"gates,omitempty"`
	// Silence is the node's silence in Alertmanager while it is in
	// maintenance: "ID until TIME", or "failed: WHY" while its agent
	// retries (the maintenance goes on).
	Silence string `json:"silence,omitempty"`
}

// Gate is one gate's verdict: open, closed or unchecked (only the head of
// a queue checks the cluster-wide gates).
type Gate struct {
	Gate    string `json:"gate"`
	Verdict string `json:"verdict"`
	Reason  string `json:"reason,omitempty"`
}

// lockGroup is the group a lock belongs to, as operators name it.
func lockGroup(l *coordv1.Lease) string {
	if g, ok := groupOfLock(lock.LockOf(l)); ok {
		return g.String()
	}
	return ""
}

// groupOfLock is the group a lock belongs to: its label and annotation, or
// for a lock-default-N from before they were written, the default group.
func groupOfLock(l lock.Lock) (lock.GroupRef, bool) {
	if l.Grouped {
		return l.Group, true
	}
	if strings.HasPrefix(l.Name, "lock-default-") {
		return lock.DefaultGroup, true
	}
	return lock.GroupRef{}, false
}

// Inputs are the objects a status is built from.
type Inputs struct {
	Namespace string
	Leases    []coordv1.Lease
	Nodes     []corev1.Node
	Control   *corev1.ConfigMap // nil when absent
	Kured     *appsv1.DaemonSet // nil when Kured is not installed
	KuredKeys []string          // the annotations its lock is under (empty: kured.LockAnnotations)
	// Policies are the MaintenancePolicies (read only when the Reader has a
	// dynamic client): forecasts need their windows, slots and spacing.
	Policies []*policy.MaintenancePolicy
	// PoliciesErr says why the policies could not be read (forbidden).
	PoliciesErr error
	Now         time.Time
	StaleAfter  time.Duration // a record without heartbeat for this long is not live
}

// DefaultStaleAfter matches the agents' default: four 10 s heartbeats.
const DefaultStaleAfter = 40 * time.Second

// Build computes the status. Nodes are sorted: lock holders first, then the
// queue in grant order, then the rest by name; Idle nodes are included
// (callers filter them).
func Build(in Inputs) MaintenanceStatus {
	s := MaintenanceStatus{APIVersion: APIVersion, Kind: Kind, Namespace: in.Namespace, Time: in.Now, Locks: []Lock{}, Nodes: []Node{}}
	s.Paused, s.PausedReason = lock.Paused(in.Control)
	var records []lock.Record
	holding := map[string]bool{}
	newer := map[string]string{} // node → the format of its record, one this build does not read
	for i := range in.Leases {
		l := &in.Leases[i]
		switch {
		case lock.IsRecordName(l.Name):
			r := lock.RecordFromLease(l)
			if err := lock.CheckFormat(l); err != nil {
				newer[r.Node] = l.Annotations[lock.AnnotationFormat]
			}
			records = append(records, r)
		case lock.IsLockName(l.Name):
			lk := Lock{Name: l.Name, Group: lockGroup(l), Holder: lock.Holder(l)}
			if lk.Holder != "" && l.Spec.AcquireTime != nil {
				t := l.Spec.AcquireTime.Time
				lk.Since = &t
			}
			if lk.Holder != "" {
				holding[lk.Holder] = true
			}
			s.Locks = append(s.Locks, lk)
		}
	}
	sort.Slice(s.Locks, func(i, j int) bool { return s.Locks[i].Name < s.Locks[j].Name })

	if in.Kured != nil {
		k := &KuredLock{Holders: []string{}}
		l, err := kuredapi.Locks(in.Kured, in.KuredKeys)
		if err != nil {
			k.Error = err.Error()
		}
		k.MaxOwners = l.MaxOwners()
		for _, h := range l.Active(in.Now) {
			k.Holders = append(k.Holders, h.NodeID)
		}
		s.Kured = k
	}

	// Queue positions per group.
	position := map[string]int{}
	groups := map[lock.GroupRef]bool{}
	for _, r := range records {
		groups[r.GroupRef()] = true
	}
	readable := slices.DeleteFunc(slices.Clone(records), func(r lock.Record) bool { return newer[r.Node] != "" })
	for g := range groups {
		for i, r := range lock.GrantOrder(readable, g, in.Now, in.StaleAfter) {
			position[r.Node] = i + 1
		}
	}

	nodeObj := map[string]*corev1.Node{}
	for i := range in.Nodes {
		nodeObj[in.Nodes[i].Name] = &in.Nodes[i]
	}
	seen := map[string]bool{}
	for _, r := range records {
		n := Node{
			Name: r.Node, State: r.State, QueuePosition: position[r.Node], Reason: r.Reason,
			Message: r.Message, RequestID: r.RequestID, Group: r.GroupRef().String(), Policy: r.Policy,
			Blocked: r.Blocked, Live: r.Live(in.Now, in.StaleAfter), Silence: r.Silence,
		}
		if f, ok := newer[r.Node]; ok {
			// Shown as read, saying that it may be misread.
			n.Message = fmt.Sprintf("record in format %q, which this kustodian-ctl does not read (upgrade it); as read: %s", f, n.Message)
		}
		if r.State == lock.Waiting && r.Gates != "" {
			_ = json.Unmarshal([]byte(r.Gates), &n.Gates) // unreadable: shown without
		}
		if n.State == "" {
			n.State = lock.Idle
		}
		if !r.Since.IsZero() {
			t := r.Since
			n.Since = &t
		}
		if !r.Requested.IsZero() {
			t := r.Requested
			n.Requested = &t
		}
		if !r.Heartbeat.IsZero() {
			age := in.Now.Sub(r.Heartbeat).Round(100 * time.Millisecond).Seconds()
			n.HeartbeatAge = &age
		}
		if obj := nodeObj[r.Node]; obj != nil {
			n.HasNode = true
			n.CordonedBy, n.Conditions = cordonedBy(obj), maintenanceConditions(obj)
		}
		s.Nodes = append(s.Nodes, n)
		seen[r.Node] = true
	}
	// Holders without a record (their agent crashed before writing it, or
	// the record was deleted) and every other node, as Idle.
	for h := range holding {
		if !seen[h] {
			n := Node{Name: h, State: "HoldsLock", Message: "holds a lock but has no record"}
			if obj := nodeObj[h]; obj != nil {
				n.HasNode, n.CordonedBy, n.Conditions = true, cordonedBy(obj), maintenanceConditions(obj)
			}
			s.Nodes = append(s.Nodes, n)
			seen[h] = true
		}
	}
	for _, obj := range in.Nodes {
		if !seen[obj.Name] {
			s.Nodes = append(s.Nodes, Node{Name: obj.Name, State: lock.Idle, HasNode: true, CordonedBy: cordonedBy(&obj), Conditions: maintenanceConditions(&obj)})
		}
	}
	sort.SliceStable(s.Nodes, func(i, j int) bool {
		a, b := s.Nodes[i], s.Nodes[j]
		if ra, rb := rank(a, holding), rank(b, holding); ra != rb {
			return ra < rb
		}
		if pa, pb := queueOrder(a), queueOrder(b); pa != pb {
			return pa < pb
		}
		return a.Name < b.Name
	})
	s.printable()
	s.inputs = &in
	return s
}

// queueOrder puts waiting nodes without a position (dead agents) last.
func queueOrder(n Node) int {
	if n.QueuePosition == 0 {
		return 1 << 30
	}
	return n.QueuePosition
}

// rank orders nodes: holders, waiting nodes, other active states, Idle.
func rank(n Node, holding map[string]bool) int {
	switch {
	case holding[n.Name]:
		return 0
	case n.State == lock.Waiting:
		return 1
	case n.State != lock.Idle:
		return 2
	default:
		return 3
	}
}

func cordonedBy(n *corev1.Node) string {
	switch {
	case !n.Spec.Unschedulable:
		return ""
	case lock.CordonMarked(n.Annotations):
		return "kustodian"
	default:
		return "other"
	}
}

// Queue is the waiting nodes in grant order.
func (s MaintenanceStatus) Queue() []Node {
	var q []Node
	for _, n := range s.Nodes {
		if n.State == lock.Waiting {
			q = append(q, n)
		}
	}
	sort.SliceStable(q, func(i, j int) bool { return queueOrder(q[i]) < queueOrder(q[j]) })
	return q
}

// maintenanceConditions are the Node's maintenance conditions that are
// True, in their order.
func maintenanceConditions(n *corev1.Node) []string {
	var out []string
	for _, t := range nodemarks.ConditionTypes {
		for _, c := range n.Status.Conditions {
			if c.Type == t && c.Status == corev1.ConditionTrue {
				out = append(out, string(t))
			}
		}
	}
	return out
}

// Inputs are what the status was built from (the zero Inputs for a status
// not built by Build).
func (s MaintenanceStatus) Inputs() Inputs {
	if s.inputs == nil {
		return Inputs{}
	}
	return *s.inputs
}
