// Package request is the MaintenanceRequest (kustodian.io/v1alpha1,
// cluster-scoped): a maintenance of one node asked from the cluster, as a
// maintenance script asks from the host. Admins create and delete them;
// the node's agent takes the request through its queue, policy and drain,
// holds the node until the request is deleted or its duration has passed,
// and writes only its status.
package request

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// The MaintenanceRequest API.
const (
	Group    = "kustodian.io"
	Version  = "v1alpha1"
	Resource = "maintenancerequests"
	Kind     = "MaintenanceRequest"
)

// GVR is where MaintenanceRequests are read and written.
var GVR = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// UntilDone is spec.until's default: held until the request is deleted.
const UntilDone = "done"

// AnnotationRequestedBy names who asked (kustodian-ctl request sets it from
// the API server's SelfSubjectReview), for the Events and history.
const AnnotationRequestedBy = "kustodian.io/requested-by"

// The phases in status.phase, written by the node's agent.
const (
	Waiting       = "Waiting"
	Draining      = "Draining"
	InMaintenance = "InMaintenance"
	Completed     = "Completed"
	Failed        = "Failed"
)

// Request is what a MaintenanceRequest says.
type Request struct {
	Name    string
	UID     types.UID
	Created time.Time
	Node    string
	Reason  string
	By      string // AnnotationRequestedBy; "" when not said
	// For is how long the node is held once its maintenance began; 0:
	// until the request is deleted.
	For       time.Duration
	Phase     string
	StartedAt time.Time
}

// ParseUntil reads spec.until: "done" (or "") is 0, else a positive Go
// duration.
func ParseUntil(s string) (time.Duration, error) {
	if s == "" || s == UntilDone {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("until %q: give done or a positive duration such as 90m or 2h", s)
	}
	return d, nil
}

// FromUnstructured reads a MaintenanceRequest.
func FromUnstructured(u *unstructured.Unstructured) (Request, error) {
	r := Request{Name: u.GetName(), UID: u.GetUID(), Created: u.GetCreationTimestamp().Time, By: u.GetAnnotations()[AnnotationRequestedBy]}
	r.Node, _, _ = unstructured.NestedString(u.Object, "spec", "nodeName")
	r.Reason, _, _ = unstructured.NestedString(u.Object, "spec", "reason")
	until, _, _ := unstructured.NestedString(u.Object, "spec", "until")
	var err error
	if r.For, err = ParseUntil(until); err != nil {
		return r, fmt.Errorf("MaintenanceRequest %s: spec.%w", r.Name, err)
	}
	r.Phase, _, _ = unstructured.NestedString(u.Object, "status", "phase")
	if s, _, _ := unstructured.NestedString(u.Object, "status", "startedAt"); s != "" {
		if r.StartedAt, err = time.Parse(time.RFC3339, s); err != nil {
			return r, fmt.Errorf("MaintenanceRequest %s: status.startedAt %q: %w", r.Name, s, err)
		}
	}
	return r, nil
}

// ID is the request's ID in the node's record and history: another
// request, even with the same name, is another ID.
func (r Request) ID() string { return idPrefix + string(r.UID) }

const idPrefix = "request-"

// IsID tells whether a record's request ID is a MaintenanceRequest's (a
// host file's is hexadecimal).
func IsID(id string) bool { return strings.HasPrefix(id, idPrefix) }

// EndsAt is when a request with a duration gives the node back: zero while
// its maintenance has not begun, or without a duration.
func (r Request) EndsAt() time.Time {
	if r.For == 0 || r.StartedAt.IsZero() {
		return time.Time{}
	}
	return r.StartedAt.Add(r.For)
}

// Active tells whether the request still asks for a maintenance at now: not
// Completed, and its duration, if any, not over.
func (r Request) Active(now time.Time) bool {
	if r.Phase == Completed {
		return false
	}
	end := r.EndsAt()
	return end.IsZero() || now.Before(end)
}

// Pick is the request a node takes at now: the oldest active one (by
// creation, then name), or nil.
func Pick(reqs []Request, now time.Time) *Request {
	var active []Request
	for _, r := range reqs {
		if r.Active(now) {
			active = append(active, r)
		}
	}
	if len(active) == 0 {
		return nil
	}
	sort.Slice(active, func(i, j int) bool {
		if !active[i].Created.Equal(active[j].Created) {
			return active[i].Created.Before(active[j].Created)
		}
		return active[i].Name < active[j].Name
	})
	return &active[0]
}
