// Package lock owns Kustodian's cluster-side protocol: the lock Leases
// lock-<policy>[-<group>]-<slot>, the node records node-<node> and the FIFO queue they
// form. Locks are taken with optimistic concurrency (an Update carrying the
// resourceVersion just read) and have no expiry by default, so a lock
// survives its holder's reboot. client-go's leaderelection is deliberately
// not used: its lease must be renewed continuously.
package lock

import (
	"fmt"
	"strings"
	"time"

	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

const (
	lockPrefix   = "lock-"
	recordPrefix = "node-"
)

// RecordName is the Lease name of a node's record.
func RecordName(node string) string { return recordPrefix + node }

// IsLockName and IsRecordName tell the two kinds of Lease apart.
func IsLockName(name string) bool   { return strings.HasPrefix(name, lockPrefix) }
func IsRecordName(name string) bool { return strings.HasPrefix(name, recordPrefix) }

// NodeOfRecord is the node a record's name stands for.
func NodeOfRecord(name string) string { return strings.TrimPrefix(name, recordPrefix) }

// Holder is the node named in a lock Lease, or "".
func Holder(l *coordv1.Lease) string {
	if l == nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// HolderFacts are what decides whether a held lock may be taken over.
type HolderFacts struct {
	// NodeExists: the holder's Node object exists.
	NodeExists bool
	// Record is the holder's node record; nil when it has none.
	Record *Record
}

// Verdict explains a decision about a lock, for messages and logs.
type Verdict struct {
	Free bool
	// Why, when not free: "held by node-a"; when free over a holder: why it
	// no longer counts.
	Why string
}

// Decide says whether node may take lock l now (docs/design.md, "Locks and the queue"): a lock is
// free when nobody holds it, when node already holds it, when its holder's
// Node is gone and the holder's record heartbeat is stale, or when a TTL is
// set and the holder has not renewed it within the TTL. An agent whose token
// is bound to its Node (p.Owner set) never takes over another's lock: the
// admission policy forbids it, and the lock goes with its holder's Node
// instead (the garbage collector deletes it).
func Decide(l Lock, node string, holder HolderFacts, now time.Time, p Params) Verdict {
	h := l.Holder
	switch {
	case h == "":
		return Verdict{Free: true}
	case h == node:
		return Verdict{Free: true, Why: "already held by this node"}
	}
	if p.Owner != nil {
		if !holder.NodeExists {
			if l.OwnedByHolder {
				return Verdict{Why: fmt.Sprintf("held by %s, whose Node is gone (the garbage collector deletes the lock with it)", h)}
			}
			return Verdict{Why: fmt.Sprintf("held by %s, whose Node is gone; the lock has no owner to go with, so an admin must free it: kustodian-ctl release %s", h, h)}
		}
		return Verdict{Why: "held by " + h}
	}
	if p.TTL > 0 {
		if now.Sub(l.Renewed) > p.TTL {
			return Verdict{Free: true, Why: fmt.Sprintf("holder %s did not renew it within the TTL %s", h, p.TTL)}
		}
	}
	if !holder.NodeExists {
		if holder.Record == nil || !holder.Record.Live(now, p.StaleAfter) {
			return Verdict{Free: true, Why: fmt.Sprintf("holder %s has no Node object and no live agent", h)}
		}
		return Verdict{Why: fmt.Sprintf("held by %s (its Node object is gone but its agent is alive)", h)}
	}
	return Verdict{Why: "held by " + h}
}

// NodeRef names a Node: the one an agent's token is bound to.
type NodeRef struct {
	Name string
	UID  string
}

// ownerReference makes a lock depend on its holder's Node.
func (n NodeRef) ownerReference() metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: types.UID(n.UID)}
}

// ownedByNode tells whether l is owned by the Node named node.
func ownedByNode(l *coordv1.Lease, node string) bool {
	for _, r := range l.OwnerReferences {
		if r.Kind == "Node" && r.APIVersion == "v1" && r.Name == node {
			return true
		}
	}
	return false
}

// withoutNodeOwners drops the Node owners from a lock being given back or
// passed on: a lock belongs to its current holder's Node only.
func withoutNodeOwners(refs []metav1.OwnerReference) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	for _, r := range refs {
		if !(r.Kind == "Node" && r.APIVersion == "v1") {
			out = append(out, r)
		}
	}
	return out
}

// Lock is a lock Lease as the protocol reads it, parsed once: what the
// decisions about it need, and nothing of the Lease's other fields.
type Lock struct {
	Name   string
	Holder string // "" when free
	// Group is the group the lock belongs to, when Grouped (its label and
	// annotation say so).
	Group   GroupRef
	Grouped bool
	// Renewed is its renewTime, else its acquireTime; zero when neither.
	Renewed time.Time
	// OwnedByHolder: the holder's Node owns it, so the garbage collector
	// deletes it with that Node.
	OwnedByHolder bool
	// ReleasedAt is when its last holder gave it back
	// (AnnotationReleasedAt); zero when it does not say or does not read.
	ReleasedAt time.Time
	// Disrupted are the controllers its holder's drain evicted pods of.
	Disrupted []string
	// Version is the Lease's resourceVersion.
	Version string
}
