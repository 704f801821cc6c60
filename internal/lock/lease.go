package lock

import (
	"encoding/json"
	"sort"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The protocol's changes to its Leases, as pure functions: the API client
// (package lockapi) reads a Lease, changes a copy with one of these, and
// writes it back with the version it read.

// Take makes l a lock of group held by node from now. With p.Owner the
// lock is owned by that Node alone, so the garbage collector deletes it
// with the Node; with p.TTL it says how long it lasts unrenewed.
func Take(l *coordv1.Lease, group GroupRef, node string, now time.Time, p Params) {
	markGroup(l, group)
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[LabelManagedBy] = ManagedBy
	l.Spec.HolderIdentity = &node
	t := metav1.NewMicroTime(now)
	l.Spec.AcquireTime = &t
	l.Spec.RenewTime = &t
	l.Spec.LeaseDurationSeconds = nil
	if p.TTL > 0 {
		s := int32(p.TTL.Seconds())
		l.Spec.LeaseDurationSeconds = &s
	}
	l.OwnerReferences = withoutNodeOwners(l.OwnerReferences)
	if p.Owner != nil {
		l.OwnerReferences = append(l.OwnerReferences, p.Owner.ownerReference())
	}
}

// Free makes l a lock nobody holds, given back at now: the group's
// spacing counts from then (AnnotationReleasedAt).
func Free(l *coordv1.Lease, now time.Time) {
	empty := ""
	l.Spec.HolderIdentity = &empty
	l.Spec.AcquireTime = nil
	l.Spec.RenewTime = nil
	l.Spec.LeaseDurationSeconds = nil
	l.OwnerReferences = withoutNodeOwners(l.OwnerReferences)
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[AnnotationReleasedAt] = now.UTC().Format(time.RFC3339Nano)
}

// SetDisrupted records on lock l which controllers lost pods to its
// holder's drain (AnnotationDisrupted).
func SetDisrupted(l *coordv1.Lease, controllers []string) {
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	if v := FormatDisrupted(controllers); v != "" {
		l.Annotations[AnnotationDisrupted] = v
	} else {
		delete(l.Annotations, AnnotationDisrupted)
	}
}

// StoreSummary writes s, made by by at now, into group's queue Lease l,
// unless l holds a summary made from a later LIST: then it changes nothing
// and returns false. A Lease in a newer format is a *FormatError.
func StoreSummary(l *coordv1.Lease, group GroupRef, s Summary, by string, now time.Time) (bool, error) {
	if err := CheckFormat(l); err != nil {
		return false, err // a newer agent's: not this one's to write over
	}
	if old, err := SummaryFromLease(l); err == nil {
		if cmp, ok := VersionOrder(old.ListRV, s.ListRV); ok && cmp > 0 {
			return false, nil
		}
	}
	b, err := json.Marshal(s)
	if err != nil {
		return false, err
	}
	markGroup(l, group)
	l.Labels[LabelManagedBy] = ManagedBy
	if _, marked := l.Annotations[AnnotationFormat]; marked || l.ResourceVersion == "" {
		// A summary written before formats were marked keeps none: the
		// admission policy of such an installation lets a node change
		// only the summary and its writer.
		MarkFormat(l)
	}
	l.Annotations[AnnotationQueue] = string(b)
	TouchSummary(l, by, now)
	return true, nil
}

// TouchSummary renews a queue Lease: its head, by, is alive and waits.
func TouchSummary(l *coordv1.Lease, by string, now time.Time) {
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[AnnotationQueueBy] = by
	t := metav1.NewMicroTime(now)
	l.Spec.RenewTime = &t
}

// ReleasedAt is how an admin's release (kustodian-ctl release) changes the
// holder's record: Failed for its current request (any request when it
// names none), so that its agent does not take a lock again for it.
func ReleasedAt(r Record, now time.Time) Record {
	r.ReleasedRequest = r.RequestID
	if r.ReleasedRequest == "" {
		r.ReleasedRequest = "*"
	}
	r.State = Failed
	r.Since = now.Truncate(time.Second)
	r.Message = ReleasedByAdmin
	r.ByAdmin = true
	return r
}

// ReleasedByAdmin is the record message of a node whose locks an admin
// broke (kustodian-ctl release).
const ReleasedByAdmin = "lock released by an admin (kustodian-ctl release)"

// HandOffGroups are the groups of the locks node holds among leases: their
// queues must name their next nodes before those locks go free. Each comes
// once, in the order of the locks' names, so that every hand-off writes in
// the same order.
func HandOffGroups(leases []*coordv1.Lease, node string) []GroupRef {
	seen := map[GroupRef]bool{}
	var out []GroupRef
	for _, l := range sortedByName(leases) {
		if !IsLockName(l.Name) || Holder(l) != node {
			continue
		}
		if g, ok := GroupOfLease(l); ok && !seen[g] {
			seen[g] = true
			out = append(out, g)
		}
	}
	return out
}

// QueuesNaming are the groups whose queue summaries (among leases) still
// name node: a node that has no request any more makes them again.
func QueuesNaming(leases []*coordv1.Lease, node string) []GroupRef {
	var out []GroupRef
	for _, l := range sortedByName(leases) {
		if !IsQueueName(l.Name) {
			continue
		}
		s, err := SummaryFromLease(l)
		if err != nil || s.Index(node) < 0 {
			continue
		}
		if g, ok := GroupOfLease(l); ok {
			out = append(out, g)
		}
	}
	return out
}

// HeldBy lists, sorted, the names of the lock Leases that name node as
// holder, whatever their group: a lock taken under an older policy still
// counts.
func HeldBy(leases []*coordv1.Lease, node string) []string {
	return HeldIn(LocksOf(leases), node)
}

func sortedByName(leases []*coordv1.Lease) []*coordv1.Lease {
	out := make([]*coordv1.Lease, 0, len(leases))
	for _, l := range leases {
		if l != nil {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LockOf reads a lock Lease.
func LockOf(l *coordv1.Lease) Lock {
	k := Lock{Name: l.Name, Holder: Holder(l), Version: l.ResourceVersion,
		Disrupted: ParseDisrupted(l.Annotations[AnnotationDisrupted])}
	k.Group, k.Grouped = GroupOfLease(l)
	if l.Spec.RenewTime != nil {
		k.Renewed = l.Spec.RenewTime.Time
	} else if l.Spec.AcquireTime != nil {
		k.Renewed = l.Spec.AcquireTime.Time
	}
	k.OwnedByHolder = k.Holder != "" && ownedByNode(l, k.Holder)
	if t, err := time.Parse(time.RFC3339Nano, l.Annotations[AnnotationReleasedAt]); err == nil {
		k.ReleasedAt = t
	}
	return k
}

// LocksOf reads the lock Leases among leases, by name.
func LocksOf(leases []*coordv1.Lease) map[string]Lock {
	out := map[string]Lock{}
	for _, l := range leases {
		if l != nil && IsLockName(l.Name) {
			out[l.Name] = LockOf(l)
		}
	}
	return out
}

// HeldIn lists, sorted, the locks that name node as holder, whatever their
// group: a lock taken under an older policy still counts.
func HeldIn(locks map[string]Lock, node string) []string {
	var held []string
	for name, l := range locks {
		if l.Holder == node {
			held = append(held, name)
		}
	}
	sort.Strings(held)
	return held
}
