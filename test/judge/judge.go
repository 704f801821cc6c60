// Package judge checks a run of Kustodian's agents against the invariants of
// docs/design.md ("Invariants"), from first principles: it reads the cluster objects
// by the names and annotations the design gives them and states every rule
// itself, sharing no code with what it judges (no internal package: not the
// record parser, not the queue's order, not the lock's rules).
//
// While the agents run it follows, each with a watch that is opened again
// whenever the API server closes it (and a list again when the server lost
// the history, as after a restart with a watch cache: the gap is noted),
// the Leases of the agents' namespace, the Nodes, and the pods and
// PodDisruptionBudgets of the workloads' namespace, and notes each
// violation as it happens:
//   - more nodes of a group Draining, InMaintenance or Rebooting at once
//     than the group has slots, by the agents' records;
//   - a node's state moving in a way the state machine of docs/design.md
//     does not allow (a finished node that comes back Completing, a grant
//     without a wait);
//   - a PDB's selected, ready, not terminating pods falling below its
//     minAvailable once they had reached it.
//
// At the end (Verdict) it replays, in the API server's own order (the
// resource versions of the objects' changes, one counter for all of
// them), what the agents did rather than what they said: a node carrying
// Kustodian's cordon holds a lock then (unless its record says Failed: an
// admin may have released its lock while it waits for repair), and no
// group has more lock holders than slots. It also checks the end state: every node that
// asked ends Idle or Failed; a node left cordoned has a Failed record that
// says why, or an admin cordoned it; an Idle node carries no Kustodian
// label or annotation; no lock is held by an Idle node.
//
// A history that breaks off (a list refused after a gap) fails the verdict:
// a truncated history must not pass.
package judge

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/kustodian/kustodian/test/follow"
)

// The names and annotations of docs/design.md ("Cluster objects"), written out here on
// purpose: the judge reads the contract, not the code that implements it.
const (
	recordPrefix     = "node-"
	lockPrefix       = "lock-"
	labelPolicy      = "kustodian.io/policy"
	annState         = "kustodian.io/state"
	annMessage       = "kustodian.io/message"
	annPolicy        = "kustodian.io/policy"
	annGroup         = "kustodian.io/group"
	nodeStateLabel   = "kustodian.io/state"
	nodeCordonedMark = "kustodian.io/cordoned"

	idle          = "Idle" // no record
	waiting       = "Waiting"
	draining      = "Draining"
	inMaintenance = "InMaintenance"
	rebooting     = "Rebooting"
	completing    = "Completing"
	failed        = "Failed"
)

// next is the state machine of docs/design.md: the states a node's record
// may move to from each state. A kill -9 at any instruction only repeats a
// state, so it needs no edge of its own.
var next = map[string][]string{
	// A cycle starts with a request, and a request waits for the lock.
	idle: {waiting},
	// The lock, or the request withdrawn.
	waiting: {draining, idle},
	// Drained; a failed drain (hold) or given back (release: the record
	// goes, the node queues again); the request withdrawn mid-drain; the
	// host going down.
	draining: {inMaintenance, failed, idle, completing, rebooting},
	// The script done; a reboot; a failed managed job.
	inMaintenance: {completing, rebooting, failed},
	// Back from the boot: in maintenance again, drained again (it went
	// down mid-drain), or done.
	rebooting: {inMaintenance, draining, completing, failed},
	// Given back, or the give-back failed.
	completing: {idle, failed},
	// An admin released it, the agent drains again after a restart, or
	// the script went on and finished.
	failed: {idle, draining, inMaintenance, completing},
}

func allowed(from, to string) bool {
	for _, s := range next[from] {
		if s == to {
			return true
		}
	}
	return false
}

// active states count against a group's slots (docs/design.md, "Invariants").
func active(state string) bool {
	return state == draining || state == inMaintenance || state == rebooting
}

// Rules are what the test knows that the cluster does not say.
type Rules struct {
	// Slots of each group, by "<policy>/<group>" ("default" for the
	// built-in policy, "<policy>" for a policy without groups); a group
	// not listed has one.
	Slots map[string]int
	// Nodes an admin cordoned: they may stay cordoned.
	AdminCordoned map[string]bool
}

// Judge is a run under watch.
type Judge struct {
	client    kubernetes.Interface
	namespace string
	rules     Rules
	start     time.Time

	mu         sync.Mutex
	err        error
	violations []string
	state      map[string]string // node → its record's state
	group      map[string]string // node → its record's group
	asked      map[string]bool   // nodes that ever had a record
	history    []string
	pods       map[string]*corev1.Pod
	pdbs       map[string]*policyv1.PodDisruptionBudget
	reached    map[string]bool // PDBs whose minAvailable was met once
	evidence   []fact          // what the API server stored, for the replay
	gaps       int             // histories the API server lost (410), listed again
}

// Watch starts judging the agents of namespace, and the workloads of
// workloads (a namespace; empty: none), until ctx ends.
func Watch(ctx context.Context, client kubernetes.Interface, namespace, workloads string, rules Rules) (*Judge, error) {
	j := &Judge{
		client: client, namespace: namespace, rules: rules, start: time.Now(),
		state: map[string]string{}, group: map[string]string{}, asked: map[string]bool{},
		pods: map[string]*corev1.Pod{}, pdbs: map[string]*policyv1.PodDisruptionBudget{}, reached: map[string]bool{},
	}
	leases := client.CoordinationV1().Leases(namespace)
	if err := j.follow(ctx, "the Leases of "+namespace, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return leases.List(ctx, o)
	}, leases.Watch, j.lease); err != nil {
		return nil, err
	}
	nodes := client.CoreV1().Nodes()
	if err := j.follow(ctx, "the Nodes", func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return nodes.List(ctx, o)
	}, nodes.Watch, j.node); err != nil {
		return nil, err
	}
	if workloads == "" {
		return j, nil
	}
	pdbs := client.PolicyV1().PodDisruptionBudgets(workloads)
	if err := j.follow(ctx, "the PodDisruptionBudgets of "+workloads, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return pdbs.List(ctx, o)
	}, pdbs.Watch, j.pdb); err != nil {
		return nil, err
	}
	pods := client.CoreV1().Pods(workloads)
	if err := j.follow(ctx, "the pods of "+workloads, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return pods.List(ctx, o)
	}, pods.Watch, j.pod); err != nil {
		return nil, err
	}
	return j, nil
}

// follow lists, hands each item to observe, then follows from the list's
// resource version; a gap in the history is noted in it.
func (j *Judge) follow(ctx context.Context, what string,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
	observe func(watch.EventType, runtime.Object),
) error {
	err := follow.Start(ctx, follow.Source{What: what, List: list, Watch: watchFn}, follow.Handlers{
		Observe: func(ev follow.Event) { observe(ev.Type, ev.Object) },
		Gap: func(from, to string) {
			j.mu.Lock()
			defer j.mu.Unlock()
			j.gaps++
			j.history = append(j.history, fmt.Sprintf("%s the API server lost the history of %s after resource version %s; listed again at %s", stamp(j.start), what, from, to))
		},
		Fail: j.fail,
	})
	if err != nil {
		return fmt.Errorf("judge: %w", err)
	}
	return nil
}

func (j *Judge) fail(err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err == nil {
		j.err = err
	}
}

// violate notes a violation; j.mu is held.
func (j *Judge) violate(format string, args ...any) {
	j.violations = append(j.violations, fmt.Sprintf("%s: ", stamp(j.start))+fmt.Sprintf(format, args...))
}

func stamp(start time.Time) string {
	return fmt.Sprintf("+%.3fs", time.Since(start).Seconds())
}

func groupOf(l *coordv1.Lease) string {
	return groupName(l.Annotations[annPolicy], l.Annotations[annGroup])
}

// groupName is "<policy>/<group>", "<policy>" for a policy without groups,
// "default" for the built-in policy.
func groupName(p, g string) string {
	if p == "" {
		p = "default"
	}
	if g == "" || g == p {
		return p
	}
	return p + "/" + g
}

func (j *Judge) lease(typ watch.EventType, obj runtime.Object) {
	l, ok := obj.(*coordv1.Lease)
	if !ok {
		return
	}
	if strings.HasPrefix(l.Name, lockPrefix) {
		j.mu.Lock()
		defer j.mu.Unlock()
		f := fact{rv: rvOf(l), kind: "lock", name: l.Name, holder: holder(l), group: lockGroup(l), gone: typ == watch.Deleted}
		if f.gone {
			f.holder = ""
		}
		j.evidence = append(j.evidence, f)
		return
	}
	if !strings.HasPrefix(l.Name, recordPrefix) {
		return
	}
	node := strings.TrimPrefix(l.Name, recordPrefix)
	to, grp := l.Annotations[annState], groupOf(l)
	if typ == watch.Deleted {
		to = idle
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.evidence = append(j.evidence, fact{rv: rvOf(l), kind: "record", name: node, state: to, gone: typ == watch.Deleted})
	from, seen := j.state[node]
	if !seen {
		from = idle
	}
	if to == from {
		return
	}
	j.asked[node] = true
	j.history = append(j.history, fmt.Sprintf("%s %s %s → %s (%s) %q", stamp(j.start), node, from, to, grp, l.Annotations[annMessage]))
	// A record already there when the judge started may be in any state.
	if seen || typ != watch.Added || to == waiting {
		if !allowed(from, to) {
			j.violate("%s went %s → %s, which the state machine does not allow", node, from, to)
		}
	}
	j.state[node] = to
	if to == idle {
		delete(j.group, node)
		return
	}
	j.group[node] = grp
	if !active(to) {
		return
	}
	var in []string
	for n, s := range j.state {
		if active(s) && j.group[n] == grp {
			in = append(in, n)
		}
	}
	slots := j.rules.Slots[grp]
	if slots == 0 {
		slots = 1
	}
	if len(in) > slots {
		sort.Strings(in)
		j.violate("%d nodes of group %s active at once, %d slots: %v", len(in), grp, slots, in)
	}
}

// Gaps is how often the API server lost a history the judge followed (410
// Gone) and the judge listed again.
func (j *Judge) Gaps() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.gaps
}

// History is every state change seen, one per line, for a failure's log.
func (j *Judge) History() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return strings.Join(j.history, "\n")
}

// Violations so far, and why the history broke off if it did.
func (j *Judge) Violations() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := append([]string(nil), j.violations...)
	if j.err != nil {
		out = append(out, "the history is incomplete: "+j.err.Error())
	}
	return out
}

// Verdict is every violation seen during the run and in the end state of
// nodes, or nil. Call it once the run has settled.
func (j *Judge) Verdict(ctx context.Context, nodes []string) error {
	out := append(j.Violations(), j.replay()...)
	j.mu.Lock()
	asked := map[string]bool{}
	for n := range j.asked {
		asked[n] = true
	}
	j.mu.Unlock()
	records := map[string]*coordv1.Lease{}
	leases, err := j.client.CoordinationV1().Leases(j.namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("judge: listing the Leases of %s: %w", j.namespace, err)
	}
	for i := range leases.Items {
		if l := &leases.Items[i]; strings.HasPrefix(l.Name, recordPrefix) {
			records[strings.TrimPrefix(l.Name, recordPrefix)] = l
		}
	}
	// A node holds a lock from its grant to its give-back, and its record
	// goes only after it has given the lock back.
	for i := range leases.Items {
		l := &leases.Items[i]
		if h := holder(l); strings.HasPrefix(l.Name, lockPrefix) && h != "" && records[h] == nil {
			out = append(out, fmt.Sprintf("lock %s is held by %s, which is Idle (no record)", l.Name, h))
		}
	}
	for _, n := range nodes {
		r := records[n]
		s := idle
		if r != nil {
			s = r.Annotations[annState]
		}
		if asked[n] && s != idle && s != failed {
			out = append(out, fmt.Sprintf("%s ended %s, not Idle or Failed", n, s))
		}
		node, err := j.client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("judge: reading node %s: %w", n, err)
		}
		if node.Spec.Unschedulable && !j.rules.AdminCordoned[n] &&
			(s != failed || strings.TrimSpace(r.Annotations[annMessage]) == "") {
			out = append(out, fmt.Sprintf("%s is left cordoned without a Failed record saying why (record: %s)", n, s))
		}
		if s == idle {
			if v, ok := node.Labels[nodeStateLabel]; ok {
				out = append(out, fmt.Sprintf("%s is Idle and still labelled %s=%s", n, nodeStateLabel, v))
			}
			if _, ok := node.Annotations[nodeCordonedMark]; ok {
				out = append(out, fmt.Sprintf("%s is Idle and still annotated %s", n, nodeCordonedMark))
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return errors.New(strings.Join(out, "\n"))
}

func holder(l *coordv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}
