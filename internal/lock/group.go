package lock

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strings"

	coordv1 "k8s.io/api/coordination/v1"
)

// GroupRef names a group of nodes that share slots and a queue: a policy,
// and the value of its groupBy label ("" when it has none).
type GroupRef struct {
	Policy string
	Group  string
}

// DefaultGroup is the group of nodes that no MaintenancePolicy selects.
var DefaultGroup = GroupRef{Policy: "default"}

// String is how operators see the group: "workers", "zones/eu-1".
func (g GroupRef) String() string {
	if g.Group == "" {
		return g.Policy
	}
	return g.Policy + "/" + g.Group
}

// MaxGroupSegment bounds the group's part of a lock name.
const MaxGroupSegment = 40

var unsafeChars = regexp.MustCompile(`[^a-z0-9-]+`)

// segment makes a label value usable in a Lease name: lower-case letters,
// digits and '-', with a short hash of the value when it had to change, so
// that two values never share a name.
func segment(v string) string {
	s := strings.Trim(unsafeChars.ReplaceAllString(strings.ToLower(v), "-"), "-")
	if s == v && len(s) <= MaxGroupSegment {
		return s
	}
	sum := sha256.Sum256([]byte(v))
	if len(s) > MaxGroupSegment-7 {
		s = strings.Trim(s[:MaxGroupSegment-7], "-")
	}
	if s == "" {
		return hex.EncodeToString(sum[:3])
	}
	return s + "-" + hex.EncodeToString(sum[:3])
}

// LockName is the Lease of a slot of the group: lock-<policy>-<slot>, or
// lock-<policy>-<group>-<slot> for a group of a groupBy label. The default
// group's first slot is lock-default-0.
func (g GroupRef) LockName(slot int) string {
	if g.Group == "" {
		return fmt.Sprintf("%s%s-%d", lockPrefix, g.Policy, slot)
	}
	return fmt.Sprintf("%s%s-%s-%d", lockPrefix, g.Policy, segment(g.Group), slot)
}

// LockNames are the Leases of the group's slots.
func (g GroupRef) LockNames(slots int) []string {
	names := make([]string, slots)
	for i := range names {
		names[i] = g.LockName(i)
	}
	return names
}

// Labels and annotations that tie a lock to its group.
const (
	LabelPolicy      = "kustodian.io/policy"
	AnnotationPolicy = "kustodian.io/policy"
)

// GroupOfLease is the group a lock Lease belongs to, from its label and
// annotation; ok is false for Leases that do not say.
func GroupOfLease(l *coordv1.Lease) (GroupRef, bool) {
	p := l.Labels[LabelPolicy]
	if p == "" {
		return GroupRef{}, false
	}
	return GroupRef{Policy: p, Group: l.Annotations[AnnotationGroup]}, true
}

// markGroup labels a lock with its group.
func markGroup(l *coordv1.Lease, g GroupRef) {
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[LabelPolicy] = g.Policy
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	if g.Group == "" {
		delete(l.Annotations, AnnotationGroup)
	} else {
		l.Annotations[AnnotationGroup] = g.Group
	}
}

// MaxDisrupted bounds how many controllers a lock remembers, and
// MaxDisruptedBytes the annotation's length.
const (
	MaxDisrupted      = 32
	MaxDisruptedBytes = 8192
)

// FormatDisrupted is the value of AnnotationDisrupted: at most MaxDisrupted
// controllers (kind/namespace/name), comma-separated, in at most
// MaxDisruptedBytes.
func FormatDisrupted(controllers []string) string {
	var b strings.Builder
	for i, c := range controllers {
		if i == MaxDisrupted || b.Len()+1+len(c) > MaxDisruptedBytes {
			break
		}
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(c)
	}
	return b.String()
}

// ParseDisrupted reads AnnotationDisrupted.
func ParseDisrupted(v string) []string {
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}
