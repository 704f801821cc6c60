// Package kured reads (and, for the host integration, will write) Kured's
// lock: the annotation weave.works/kured-node-lock on the DaemonSet
// kube-system/kured.
package kured

import (
	"encoding/json"
	"fmt"
	"time"
)

// Where Kured keeps its lock.
const (
	Namespace      = "kube-system"
	DaemonSet      = "kured"
	LockAnnotation = "weave.works/kured-node-lock"
)

// Holder is one holder of Kured's lock.
type Holder struct {
	NodeID   string `json:"nodeID"`
	Metadata struct {
		Unschedulable bool `json:"unschedulable"`
	} `json:"metadata"`
	Created time.Time `json:"created"`
	// TTL in nanoseconds, as Kured writes it; 0 means never expires.
	TTL time.Duration `json:"TTL"`
}

// Expired reports whether the holder's TTL has run out at now.
func (h Holder) Expired(now time.Time) bool {
	return h.TTL > 0 && now.Sub(h.Created) > h.TTL
}

// Lock is Kured's lock in either of its formats: one holder, or up to
// MaxOwners holders (Kured's --concurrency above 1).
type Lock struct {
	MaxOwners int      `json:"maxOwners,omitempty"`
	Holders   []Holder `json:"-"`
}

// ParseLock reads the annotation's value; "" is a free lock.
func ParseLock(value string) (Lock, error) {
	if value == "" {
		return Lock{}, nil
	}
	var multi struct {
		MaxOwners int      `json:"maxOwners"`
		Locks     []Holder `json:"locks"`
	}
	if err := json.Unmarshal([]byte(value), &multi); err != nil {
		return Lock{}, fmt.Errorf("kured lock %q: %w", value, err)
	}
	if multi.MaxOwners > 0 || multi.Locks != nil {
		return Lock{MaxOwners: multi.MaxOwners, Holders: multi.Locks}, nil
	}
	var single Holder
	if err := json.Unmarshal([]byte(value), &single); err != nil {
		return Lock{}, fmt.Errorf("kured lock %q: %w", value, err)
	}
	if single.NodeID == "" {
		return Lock{}, nil
	}
	return Lock{Holders: []Holder{single}}, nil
}

// Active returns the holders whose TTL has not run out.
func (l Lock) Active(now time.Time) []Holder {
	var out []Holder
	for _, h := range l.Holders {
		if h.NodeID != "" && !h.Expired(now) {
			out = append(out, h)
		}
	}
	return out
}
