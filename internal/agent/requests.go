package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kustodian/kustodian/internal/hostfiles"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/request"
)

// A maintenance asked from the cluster (a MaintenanceRequest for this
// node) is taken as a request file is: the same queue, policy and drain.
// The host's own request file goes first; a cluster request waits behind
// it.

// requestsInstalled tells whether the MaintenanceRequest CRD is installed
// (a cluster-wide resource: asked with this node's field selector).
func (a *Agent) requestsInstalled(ctx context.Context) (bool, error) {
	if a.caches.dyn == nil {
		return false, nil
	}
	_, err := a.caches.dyn.Resource(request.GVR).List(ctx, metav1.ListOptions{Limit: 1,
		FieldSelector: fields.OneTermEqualSelector("spec.nodeName", a.node).String()})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		a.log.Log(ctx, slog.LevelInfo, "the MaintenanceRequest CRD is not installed; maintenances are asked from this host only")
		return false, nil
	case apierrors.IsForbidden(err):
		return false, permanent(fmt.Errorf("may not read MaintenanceRequests: the installation is older than this agent (run kustodian-ctl install -n %s)", a.cfg.Namespace))
	default:
		return false, fmt.Errorf("reading the MaintenanceRequests of node %s: %w", a.node, err)
	}
}

// clusterRequests are this node's MaintenanceRequests in the cache.
func (a *Agent) clusterRequests() []request.Request {
	if a.caches.requests == nil {
		return nil
	}
	var reqs []request.Request
	for _, obj := range a.caches.requests.List() {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			continue
		}
		r, err := request.FromUnstructured(u)
		if err != nil {
			a.log.Warn("a MaintenanceRequest that cannot be read is passed over", "err", err)
			continue
		}
		if r.Node == a.node {
			reqs = append(reqs, r)
		}
	}
	return reqs
}

// clusterRequest is the MaintenanceRequest this node takes now
// (request.Pick), or nil. While the node's record works on another
// request (the host's, or a cluster request that just ended), none: that
// one completes first (uncordon, release, history), and the next request
// goes through the queue again.
func (a *Agent) clusterRequest(rec *lock.Record) *request.Request {
	cr := request.Pick(a.clusterRequests(), a.now())
	if cr != nil && rec != nil && rec.RequestID != "" && rec.RequestID != cr.ID() && rec.State != lock.Idle {
		return nil
	}
	return cr
}

// requestOf is the request a snapshot sees: a cluster request the record
// works on already; else the host's file; else the cluster's request (its
// reason says who asked, as kustodian-ctl request wrote it); else none.
func requestOf(file *hostfiles.Request, cr *request.Request, rec *lock.Record) *hostfiles.Request {
	if rec != nil && rec.State != lock.Idle && request.IsID(rec.RequestID) && (cr == nil || rec.RequestID != cr.ID()) {
		// The record's cluster request is over (done, or its time):
		// it completes before the host's request begins.
		return nil
	}
	working := cr != nil && rec != nil && rec.RequestID == cr.ID() && rec.State != lock.Idle
	if (file != nil && !working) || cr == nil {
		return file
	}
	reason := cr.Reason
	if cr.By != "" {
		reason += " (asked by " + cr.By + ")"
	}
	return &hostfiles.Request{ID: cr.ID(), Reason: hostfiles.CleanReason(reason)}
}

// requestSide is the MaintenanceRequest the node works on, as its status
// last said it.
type requestSide struct {
	// current is the request the record works on (or worked on last),
	// its phase and when its maintenance began, as written; wakeAt, when
	// a request with a duration gives the node back.
	current   *request.Request
	phase     string
	startedAt time.Time
	wakeAt    time.Time
}

// phaseOf is what a MaintenanceRequest says of the node's state. A
// Completing node is not given back yet: its request stays InMaintenance
// (or Failed) until the node is Idle.
func phaseOf(s lock.State) string {
	switch s {
	case lock.Idle:
		return request.Completed
	case lock.Draining:
		return request.Draining
	case lock.InMaintenance, lock.Rebooting:
		return request.InMaintenance
	case lock.Failed:
		return request.Failed
	}
	return request.Waiting
}

// reportRequest writes the state of the node into the status of the
// MaintenanceRequest its record works on: its phase, when its maintenance
// began and, with a duration, ends; Completed once the node is back
// (uncordoned, its lock released: at Idle, before its record goes), or
// once the request is over while the node works on another. A request
// deleted meanwhile (kustodian-ctl done) is not written. Nothing is kept
// as written before the API server took it: a failed write is made again
// whole at the next step.
func (a *Agent) reportRequest(ctx context.Context, state lock.State, r lock.Record) error {
	side := &a.reported.request
	if side.current == nil || (r.RequestID != "" && r.RequestID != side.current.ID()) {
		// Take up the request the record names, active or not (one whose
		// duration ended while the agent was down is Completed here).
		for _, cr := range a.clusterRequests() {
			if cr.ID() == r.RequestID {
				side.current, side.phase, side.startedAt, side.wakeAt = &cr, cr.Phase, cr.StartedAt, cr.EndsAt()
				break
			}
		}
	}
	if side.current == nil {
		return nil
	}
	phase := phaseOf(state)
	if r.RequestID != side.current.ID() {
		// The record went on: this one is over, or waits behind the
		// host's request.
		phase = request.Completed
		for _, cr := range a.clusterRequests() {
			if cr.UID == side.current.UID && cr.Active(a.now()) {
				phase = request.Waiting
			}
		}
	}
	if phase == side.phase || state == lock.Completing {
		// Completing: the node is not given back yet (and its record no
		// longer names the request that ended): the phase waits for Idle.
		return nil
	}
	status := map[string]any{"phase": phase, "message": r.Message}
	now := a.now().UTC()
	started, end := side.startedAt, side.wakeAt
	if phase == request.InMaintenance && started.IsZero() {
		started = now
		status["startedAt"] = now.Format(time.RFC3339)
		if side.current.For > 0 {
			end = now.Add(side.current.For)
			status["endsAt"] = end.Format(time.RFC3339)
		}
	}
	if phase == request.Completed {
		status["completedAt"] = now.Format(time.RFC3339)
	}
	body, _ := json.Marshal(map[string]any{"status": status})
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := a.caches.dyn.Resource(request.GVR).Patch(pctx, side.current.Name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	switch {
	case apierrors.IsNotFound(err):
		// Deleted (done): nothing to say.
	case err != nil:
		return fmt.Errorf("writing the status of maintenancerequest/%s (phase %s): %w", side.current.Name, phase, err)
	}
	side.phase, side.startedAt, side.wakeAt = phase, started, end
	if phase == request.Completed {
		*side = requestSide{}
	}
	return nil
}
