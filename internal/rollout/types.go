// Package rollout owns the MaintenanceRollout (docs/rollout.md): its API
// types, the manifest its signature covers, the signature itself, and
// which nodes a rollout reaches when. Everything here is a pure function
// of the objects, the nodes and a clock; the agent observes and acts.
package rollout

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The API group, version and resource of MaintenanceRollout.
const (
	Group    = "kustodian.io"
	Version  = "v1alpha1"
	Kind     = "MaintenanceRollout"
	Resource = "maintenancerollouts"
)

// GVR is where MaintenanceRollouts are read and written.
var GVR = schema.GroupVersionResource{Group: Group, Version: Version, Resource: Resource}

// MaintenanceRollout is a signed script to run once on every node it
// selects, stage by stage, through each node's queue, policy and drain.
type MaintenanceRollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              Spec   `json:"spec"`
	Status            Status `json:"status,omitempty"`
}

// Spec is a rollout's spec. The field names are a contract
// (docs/rollout.md): add, never rename.
type Spec struct {
	// Script runs as root on each node, in a directory that holds Files.
	// A patch campaign has none: Patch says what runs.
	Script Source `json:"script,omitzero"`
	// Patch, instead of a script: the host's own package updates,
	// installed with its own package manager from its own repositories.
	// The first node resolves the versions; every later node installs
	// exactly those (status.patch).
	Patch *PatchSpec `json:"patch,omitempty"`
	// RollbackScript runs on a node whose Script failed, before the node
	// is held (or the script tried again).
	RollbackScript *Source `json:"rollbackScript,omitempty"`
	// Files are put beside the script, by name.
	Files []File `json:"files,omitempty"`
	// Reboot: auto reboots the node when the script leaves the reboot
	// sentinel, and runs it again after the boot; never, or no value (as
	// signed before kustodian-ctl wrote it always), does not.
	// kustodian-ctl rollout create writes auto unless told never, as
	// kustodian run and the playbooks default to.
	Reboot string `json:"reboot,omitempty"`
	// Signature is an SSH signature (ssh-keygen -Y sign -n
	// kustodian-rollout, or kustodian-ctl rollout sign) over the
	// rollout's manifest: its name, the scripts, the files and Reboot.
	Signature string `json:"signature"`

	// NodeSelector picks the nodes; empty picks every node.
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`
	// NewNodes: nodes created after the rollout run it too once they
	// match (the default); false: only the nodes that existed then.
	NewNodes *bool `json:"newNodes,omitempty"`
	// Stages open one after the other; each reaches more nodes than the
	// one before. Default: one node, then all.
	Stages []Stage `json:"stages,omitempty"`
	// Promotion: how the next stage opens.
	Promotion Promotion `json:"promotion,omitempty"`
	// Promoted is the last stage an admin opened (kustodian-ctl rollout
	// promote); 0: the first stage only.
	Promoted int `json:"promoted,omitempty"`
	// OnFailure: what a failed node does.
	OnFailure OnFailure `json:"onFailure,omitempty"`
	// Paused: no node starts the rollout (those that have finish).
	Paused bool `json:"paused,omitempty"`
	// Aborted: no node starts the rollout any more, for good.
	Aborted bool `json:"aborted,omitempty"`
	// Deadline: when every selected node should be done. The rollout
	// then starts one node at a time and lets more in only as its
	// predicted end needs (Pace), and says when one at a time would miss
	// it (condition AtRisk).
	Deadline *metav1.Time `json:"deadline,omitempty"`
	// MaxConcurrency bounds how many of the rollout's nodes are in it
	// (queued or running) at once; none: no bound of its own.
	MaxConcurrency *int `json:"maxConcurrency,omitempty"`
}

// Which updates a patch campaign installs.
const (
	UpdatesAll      = "all"
	UpdatesSecurity = "security"
)

// When a patch campaign's node reboots.
const (
	PatchRebootIfRequired = "ifRequired"
	PatchRebootNever      = "never"
)

// PatchSpec says what a patch campaign installs: every update the hosts'
// repositories offer (all, the default) or those of their security
// releases (security), narrowed by Include (none: every package) and
// Exclude, shell patterns of package names; and whether a node reboots
// when its host then needs it (ifRequired, the default) or never.
type PatchSpec struct {
	Updates string   `json:"updates,omitempty"`
	Include []string `json:"include,omitempty"`
	Exclude []string `json:"exclude,omitempty"`
	Reboot  string   `json:"reboot,omitempty"`
}

// PackageChange is a change of one package: From the version before ("":
// not installed), To the version after.
type PackageChange struct {
	Name string `json:"name"`
	From string `json:"from,omitempty"`
	To   string `json:"to"`
}

// PatchStatus is what a patch campaign's first node resolved: the set
// every later node installs, exactly. The node that resolves it claims
// it first (ResolvedOn, Signature: the signed spec it resolves for; no
// ResolvedAt, no Packages), in the same write as its place in the queue,
// and fills it once, when its own install succeeded. An admission policy
// holds the nodes to that.
type PatchStatus struct {
	// Revision is the rollout's revision the set is of.
	Revision string `json:"revision,omitempty"`
	// Signature is the spec's signature the set is of: a spec signed
	// anew (what is installed changed) is resolved again; a promotion, a
	// pause or new stages, which the signature does not cover, are not.
	Signature  string `json:"signature,omitempty"`
	ResolvedOn string `json:"resolvedOn,omitempty"`
	// ResolvedAt is when the first node's install succeeded: the set is
	// proven, and the other nodes install it.
	ResolvedAt *metav1.Time    `json:"resolvedAt,omitempty"`
	Packages   []PackageChange `json:"packages,omitempty"`
}

// MaxSet bounds the packages of a resolved set, and MaxNodePackages those
// a node lists in its entry (NodePatch): a rollout is one object, and its
// status is written by every node.
const (
	MaxSet          = 2000
	MaxNodePackages = 50
)

// Resolved says whether s is a set proven for the spec signed with sig.
func (s *PatchStatus) Resolved(sig string) bool {
	return s != nil && sig != "" && s.Signature == sig && s.ResolvedAt != nil
}

// ClaimedBy is the node that claimed the set of the spec signed with sig,
// resolved or not; "" when none did.
func (s *PatchStatus) ClaimedBy(sig string) string {
	if s == nil || sig == "" || s.Signature != sig {
		return ""
	}
	return s.ResolvedOn
}

// NodePatch is what a node of a patch campaign changed, against the
// campaign's set, in its entry: Changed packages in all (nil: the entry is
// no patch campaign's, or says nothing yet); Packages, those whose version
// before was not the first node's, so that a node that changed exactly
// the set lists none (a rollout is one object, written by every node: a
// thousand nodes listing the same changes would not fit); Skipped, the
// set's packages it did not change (not installed here, or newer
// already); Cut, the lists were cut at MaxNodePackages (the host's job
// directory has them whole); Rebooted, the install needed a reboot and the
// node rebooted.
type NodePatch struct {
	Changed  *int            `json:"packagesChanged,omitempty"`
	Packages []PackageChange `json:"packages,omitempty"`
	Skipped  []string        `json:"packagesSkipped,omitempty"`
	Cut      bool            `json:"packagesCut,omitempty"`
	Rebooted bool            `json:"rebooted,omitempty"`
}

// Source is a script: inline, or a key of a ConfigMap in the rollout's
// namespace. SHA256 is the hex digest of its bytes.
type Source struct {
	Inline    string     `json:"inline,omitempty"`
	ConfigMap *KeySource `json:"configMap,omitempty"`
	SHA256    string     `json:"sha256"`
}

// KeySource is a key of a ConfigMap (data or binaryData).
type KeySource struct {
	Name string `json:"name"`
	Key  string `json:"key"`
}

// File is a file the script finds in its directory.
type File struct {
	// Name is the file's name in the script's directory (no slash).
	Name   string `json:"name"`
	Source `json:",inline"`
}

// Stage is one step of a rollout: exactly one of its fields is set.
// Stages are cumulative: a stage reaches the nodes of the stages before it
// and more.
type Stage struct {
	// Nodes: this many nodes in all.
	Nodes *int `json:"nodes,omitempty"`
	// Percent: this share of the selected nodes in all (at least one).
	Percent *int `json:"percent,omitempty"`
	// Selector: the nodes it selects, besides those of earlier stages.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// All: every selected node.
	All bool `json:"all,omitempty"`
}

// Promotion modes.
const (
	PromotionManual = "manual"
	PromotionAuto   = "auto"
)

// Promotion says how the next stage opens.
type Promotion struct {
	// Mode: manual (the default) waits for kustodian-ctl rollout promote;
	// auto opens the next stage once this one has succeeded and Soak has
	// passed since each node's agent saw it succeed (Seen).
	Mode string           `json:"mode,omitempty"`
	Soak *metav1.Duration `json:"soak,omitempty"`
}

// Failure actions.
const (
	FailureStop  = "stop"
	FailureRetry = "retry"
)

// OnFailure says what a node whose script failed does after its rollback.
type OnFailure struct {
	// Action: stop (the default) holds the node and stops the rollout;
	// retry runs the script again after Backoff (doubling), at most
	// Retries times, then stops.
	Action  string           `json:"action,omitempty"`
	Retries int              `json:"retries,omitempty"`
	Backoff *metav1.Duration `json:"backoff,omitempty"`
}

// Status is what the nodes report: each node writes its own entry in
// Nodes, and the summary with it.
type Status struct {
	// Revision is the rollout's revision (Revision of its manifest).
	Revision string `json:"revision,omitempty"`
	// Stage is the stage open now.
	Stage int `json:"stage"`
	// Stages says how far each stage has come.
	Stages []StageStatus `json:"stages,omitempty"`
	// Nodes has one entry per node that took the rollout, by name.
	Nodes []NodeStatus `json:"nodes,omitempty"`
	// Counts are the entries of this revision by state, and the nodes it
	// selects.
	Counts Counts `json:"counts"`
	// FirstFailure is the first node that failed in this revision.
	FirstFailure *NodeStatus `json:"firstFailure,omitempty"`
	// Conditions: Progressing, Complete, Failed.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Patch, in a patch campaign, is the set its first node resolved.
	Patch *PatchStatus `json:"patch,omitempty"`
}

// A node's states in a rollout.
const (
	Waiting     = "Waiting" // its request is queued
	Running     = "Running" // its node is drained and the script runs
	RollingBack = "RollingBack"
	Succeeded   = "Succeeded"
	Failed      = "Failed"     // the script failed; no rollback, or it failed too
	RolledBack  = "RolledBack" // the script failed and the rollback succeeded
	Retrying    = "Retrying"   // failed, rolled back, and to run again after a backoff
	Refused     = "Refused"    // the signature, a digest or a source did not check out
	Cancelled   = "Cancelled"  // queued when the rollout stopped, paused or was aborted
	// Deferred: the node could take the rollout only after the places of
	// its stage were taken by others; it waits for the stage its entry
	// names (it has not taken the rollout).
	Deferred = "Deferred"
)

// NodeStatus is one node's entry.
type NodeStatus struct {
	Name     string       `json:"name"`
	Revision string       `json:"revision"`
	Stage    int          `json:"stage"`
	State    string       `json:"state"`
	Attempts int          `json:"attempts,omitempty"`
	Started  *metav1.Time `json:"started,omitempty"`
	Finished *metav1.Time `json:"finished,omitempty"`
	Message  string       `json:"message,omitempty"`
	// LastLines are the script's last lines of output when it failed.
	LastLines []string `json:"lastLines,omitempty"`
	// ObservedGeneration, of a refusal, is the rollout's generation
	// refused: a changed spec (a new signature) is checked again.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// In a patch campaign, what this node changed.
	NodePatch `json:",inline"`
}

// Stage states.
const (
	StagePending   = "Pending"   // not open yet
	StageOpen      = "Open"      // open, not all its nodes done
	StageSucceeded = "Succeeded" // every node it reaches succeeded
	StageFailed    = "Failed"    // a node of it failed
)

// StageStatus is how far one stage has come.
type StageStatus struct {
	Stage int `json:"stage"`
	// Reaches says what the stage reaches ("1 node", "25%", "zone=a",
	// "all"); Nodes, how many nodes that is now, with the stages before.
	Reaches string `json:"reaches"`
	Nodes   int    `json:"nodes"`
	// Took: the nodes that took the rollout in this stage; of them,
	// Succeeded and Failed (refusals included).
	Took      int    `json:"took"`
	Succeeded int    `json:"succeeded"`
	Failed    int    `json:"failed"`
	State     string `json:"state"`
}

// Counts of a revision's entries.
type Counts struct {
	Selected  int `json:"selected"`
	Waiting   int `json:"waiting"`
	Running   int `json:"running"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Refused   int `json:"refused"`
	// Disabled: selected nodes whose hosts do not run rollouts.
	Disabled int `json:"disabled"`
}
