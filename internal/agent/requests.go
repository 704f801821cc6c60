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

// clusterRequest is the MaintenanceRequest this node takes now
// (request.Pick), or nil.
func (a *Agent) clusterRequest() *request.Request {
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
	return request.Pick(reqs, a.now())
}

// requestOf is the request a snapshot sees: the host's file, else the
// cluster's request (its reason says who asked), else none.
func requestOf(file *hostfiles.Request, cr *request.Request) *hostfiles.Request {
	if file != nil || cr == nil {
		return file
	}
	reason := cr.Reason
	if cr.By != "" {
		reason += " (asked by " + cr.By + ")"
	}
	return &hostfiles.Request{ID: cr.ID(), Reason: reason}
}

// requestSide is the MaintenanceRequest the node works on, as its status
// last said it.
type requestSide struct {
	// current is the request of the record's last state, its phase and
	// when its maintenance began, as written; wakeAt, when a request
	// with a duration gives the node back.
	current   *request.Request
	phase     string
	startedAt time.Time
	wakeAt    time.Time
}

// phaseOf is what a MaintenanceRequest says of the node's state.
func phaseOf(s lock.State) string {
	switch s {
	case lock.Idle, lock.Completing:
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
// MaintenanceRequest it works on: its phase, when its maintenance began
// and, with a duration, ends; Completed once the node is back. A request
// deleted meanwhile (kustodian-ctl done) is not written.
func (a *Agent) reportRequest(ctx context.Context, state lock.State, r lock.Record) {
	cr := a.clusterRequest()
	side := &a.reported.request
	if cr != nil && r.RequestID == cr.ID() && (side.current == nil || side.current.UID != cr.UID) {
		side.current, side.phase, side.startedAt, side.wakeAt = cr, cr.Phase, cr.StartedAt, cr.EndsAt()
	}
	if side.current == nil {
		return
	}
	phase := phaseOf(state)
	if r.RequestID != "" && r.RequestID != side.current.ID() {
		phase = request.Completed // the node went on to another request
	}
	if phase == side.phase {
		return
	}
	status := map[string]any{"phase": phase, "message": r.Message}
	now := a.now().UTC()
	if phase == request.InMaintenance && side.startedAt.IsZero() {
		side.startedAt = now
		status["startedAt"] = now.Format(time.RFC3339)
		if side.current.For > 0 {
			end := now.Add(side.current.For)
			status["endsAt"] = end.Format(time.RFC3339)
			side.wakeAt = end
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
		a.log.Warn("cannot write the status of the MaintenanceRequest", "request", side.current.Name, "phase", phase, "err", err)
		return // tried again at the next step
	}
	side.phase = phase
	if phase == request.Completed {
		*side = requestSide{}
	}
}
