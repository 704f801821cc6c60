package agent

import (
	"encoding/json"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/history"
	"github.com/kustodian/kustodian/internal/jobs"
	"github.com/kustodian/kustodian/internal/patch"
	"github.com/kustodian/kustodian/internal/rollout"
)

// A patch campaign on this node: the agent makes a job that runs
// `kustodian patch apply` on an order it writes (patch.Order), and
// `kustodian patch rollback` when that fails. The order is the set the
// campaign's first node proved (status.patch), or, on the node that claims
// it, to resolve the set itself. The claim goes with this node's place in
// the queue (one write, against the rollout's resourceVersion), and the set
// with its entry Succeeded, once its install, its reboot and its gates
// are done: the other nodes install nothing before it is proven.

// patchPlan is what this node does about a campaign's set when the
// campaign reaches it.
type patchPlan struct {
	order patch.Order
	// claim is the claim of the set to write with this node's place (nil:
	// none); wait, why this node waits for another node's set.
	claim *rollout.PatchStatus
	wait  string
}

func planPatch(r *rollout.MaintenanceRollout, rev, self string) patchPlan {
	spec, s, sig := *r.Spec.Patch, r.Status.Patch, r.Spec.Signature
	switch {
	case s.Resolved(sig):
		set := s.Packages
		if set == nil {
			set = []rollout.PackageChange{}
		}
		return patchPlan{order: patch.Order{Spec: spec, Set: set}}
	case s.ClaimedBy(sig) == self:
		return patchPlan{order: patch.Order{Spec: spec, Resolve: true}}
	case r.PatchClaimHeld():
		return patchPlan{wait: fmt.Sprintf("node %s resolves the set of this campaign; this node installs it once that node's install succeeded", s.ResolvedOn)}
	}
	return patchPlan{order: patch.Order{Spec: spec, Resolve: true},
		claim: &rollout.PatchStatus{Revision: rev, Signature: sig, ResolvedOn: self}}
}

// checkPatchHost refuses a campaign on a host whose package manager
// Kustodian does not drive.
func checkPatchHost() error {
	if _, err := patch.ForHost(io.Discard); err != nil {
		return &refusal{"spec.patch: " + err.Error()}
	}
	return nil
}

// patchFiles are the files of a campaign's job directory: its order.
func patchFiles(o patch.Order) (map[string][]byte, error) {
	b, err := json.MarshalIndent(o, "", "  ")
	if err != nil {
		return nil, err
	}
	return map[string][]byte{patch.OrderFile: append(b, '\n')}, nil
}

// patchJob makes job j run a campaign's order in dir: `kustodian patch
// apply`, which leaves the reboot sentinel when the host needs a reboot
// and the campaign allows one, and `kustodian patch rollback`.
func (ro *rollouter) patchJob(j *jobs.Job, spec *rollout.PatchSpec, dir string) {
	j.Command = []string{ro.exe, "patch", "apply", "--reboot-sentinel", ro.sentinel, dir}
	j.Rollback = []string{ro.exe, "patch", "rollback", dir}
	j.Reboot = jobs.RebootAuto
	if spec.Reboot == rollout.PatchRebootNever {
		j.Reboot = jobs.RebootNever
	}
}

// patchReport adds to a campaign's entry e, Succeeded, what the job in
// dir changed, and says the set to write when this node resolved it and
// its claim is not filled yet (nil: none).
func patchReport(r *rollout.MaintenanceRollout, self, dir string, e *rollout.NodeStatus, now metav1.Time) (*rollout.PatchStatus, error) {
	if r.Spec.Patch == nil || e.State != rollout.Succeeded {
		return nil, nil
	}
	res, err := patch.ReadResult(dir)
	if err != nil || res == nil {
		return nil, err
	}
	e.NodePatch = rollout.NodePatchOf(res.Set, res.Changes, res.RebootRequired)
	s := r.Status.Patch
	if !res.Resolved || s.ClaimedBy(r.Spec.Signature) != self || s.ResolvedAt != nil {
		return nil, nil
	}
	filled := *s
	filled.ResolvedAt, filled.Packages = &now, res.Set
	if filled.Packages == nil {
		filled.Packages = []rollout.PackageChange{}
	}
	return &filled, nil
}

// patchedPackages are, for the history, what the job the agent last ended
// changed when it is a patch campaign's that installed its set (an agent
// restarted since has none to say).
func (a *Agent) patchedPackages() []string {
	j := a.jobs.ended
	a.jobs.ended = nil
	if j == nil || j.Rollout == nil || j.Dir == "" {
		return nil
	}
	res, err := patch.ReadResult(j.Dir)
	if err != nil || res == nil || res.State != patch.StateInstalled {
		return nil
	}
	return history.PackageLines(res.Changes)
}
