package manifests

import (
	"fmt"
	"strconv"
	"strings"

	admv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/history"
	"github.com/kustodian/kustodian/internal/identity"
	"github.com/kustodian/kustodian/internal/kured"
	"github.com/kustodian/kustodian/internal/lock"
	"github.com/kustodian/kustodian/internal/nodemarks"
	mpolicy "github.com/kustodian/kustodian/internal/policy"
	"github.com/kustodian/kustodian/internal/rollout"
)

// The ValidatingAdmissionPolicies tie each agent token to the Node it is
// bound to (docs/security.md). RBAC cannot say "only your own Node" or "only
// your own record"; these policies can, because a Node-bound token carries
// the Node's name and UID in the user's extra info, which the API server
// fills in from the verified token. Each policy matches one kind of object,
// so that its expressions are type-checked against that kind alone.
//
// What they cannot do: look anything up (is the holder's Node gone?) or read
// a clock. So no node may ever take over another node's lock; a lock is owned
// by its holder's Node (ownerReference) and the garbage collector deletes it
// when that Node goes. And an eviction names only the pod, so evictions are
// left to RBAC.

const (
	extraNodeName = identity.ExtraNodeName
	extraNodeUID  = identity.ExtraNodeUID
	// A token bound to a Pod carries the node-name of the Pod's node too;
	// anyone who may create pods or tokens in the namespace could mint one
	// for any node. Only tokens bound to the Node itself count.
	extraPodName = identity.ExtraPodName
)

var (
	// GVRValidatingAdmissionPolicy is what install needs the API server to
	// serve.
	GVRValidatingAdmissionPolicy = admv1.SchemeGroupVersion.WithResource("validatingadmissionpolicies")
	gvrBinding                   = admv1.SchemeGroupVersion.WithResource("validatingadmissionpolicybindings")
)

// PolicyName is the name of an installation's admission policy (and of its
// binding): kustodian-agent-<namespace>-<suffix>, suffix one of bound,
// nodes, nodestatus, leases, rollouts, events, pods, kured, tokens,
// requests.
func PolicyName(namespace, suffix string) string {
	return AgentServiceAccount + "-" + namespace + "-" + suffix
}

// policy is one ValidatingAdmissionPolicy before it is dressed as an object.
type policy struct {
	suffix      string
	rules       []admv1.NamedRuleWithOperations
	variables   []admv1.Variable
	validations []admv1.Validation
}

func rule(group, resource string, ops ...admv1.OperationType) admv1.NamedRuleWithOperations {
	return admv1.NamedRuleWithOperations{RuleWithOperations: admv1.RuleWithOperations{
		Operations: ops,
		Rule:       admv1.Rule{APIGroups: []string{group}, APIVersions: []string{"*"}, Resources: []string{resource}},
	}}
}

func check(expression, messageExpression string) admv1.Validation {
	return admv1.Validation{Expression: expression, MessageExpression: messageExpression, Reason: ptr(metav1.StatusReasonForbidden)}
}

func variable(name, expression string) admv1.Variable {
	return admv1.Variable{Name: name, Expression: expression}
}

// Variables every policy has: the node the token is bound to, or "" (for a
// token not bound to a Node, or bound to a Pod).
var nodeVariables = []admv1.Variable{
	variable("node", fmt.Sprintf("'%s' in request.userInfo.extra && !('%s' in request.userInfo.extra) ? request.userInfo.extra['%s'][0] : ''", extraNodeName, extraPodName, extraNodeName)),
	variable("nodeUID", fmt.Sprintf("'%s' in request.userInfo.extra ? request.userInfo.extra['%s'][0] : ''", extraNodeUID, extraNodeUID)),
}

// boundCheck refuses tokens not bound to a Node. Every policy checks it
// first, so that such a token meets this message whichever policy speaks.
var boundCheck = check("variables.node != ''",
	"'the token of ' + request.userInfo.username + ' is not bound to a Node' + ('"+extraPodName+"' in request.userInfo.extra ? ' (it is bound to Pod ' + request.userInfo.extra['"+extraPodName+"'][0] + ')' : '') + '; give each node its own kubeconfig: kustodian-ctl kubeconfig NODE'")

func policies(kuredKeys []string) []policy {
	self := "'node ' + variables.node"
	return []policy{{
		// Every write of the agents' ServiceAccount needs a Node-bound token,
		// evictions included (the one write the other policies cannot scope).
		suffix:      "bound",
		rules:       []admv1.NamedRuleWithOperations{rule("*", "*/*", admv1.Create, admv1.Update, admv1.Delete)},
		validations: []admv1.Validation{boundCheck},
	}, {
		// Its own Node: cordon, and kustodian.io/ labels and annotations.
		suffix: "nodes",
		rules:  []admv1.NamedRuleWithOperations{rule("", "nodes", admv1.Update)},
		variables: []admv1.Variable{
			variable("labels", changedKeys("labels", oneOf(nodeLabels))),
			variable("annotations", changedKeys("annotations", oneOf(nodeAnnotations))),
		},
		validations: []admv1.Validation{
			check("object.metadata.name == variables.node",
				self+" + ' may change only its own Node, not ' + object.metadata.name"),
			check(unchangedBut("spec", "unschedulable"),
				self+" + ' may change only spec.unschedulable of its Node, not ' + "+changedBut("spec", "unschedulable")+".join(', ')"),
			check("size(variables.labels) == 0",
				self+" + ' may change only the labels "+strings.Join(nodeLabels, ", ")+" of its Node, not ' + variables.labels.join(', ')"),
			check("size(variables.annotations) == 0",
				self+" + ' may change only the annotations "+strings.Join(nodeAnnotations, ", ")+" of its Node, not ' + variables.annotations.join(', ')"),
			check(fmt.Sprintf("size(bytes(object.metadata.?annotations.orValue({})[?'%s'].orValue(''))) <= %d", history.Annotation, history.MaxBytes),
				self+fmt.Sprintf(" + ' may keep at most %d bytes of history in its annotation %s'", history.MaxBytes, history.Annotation)),
			// A version as versions are written, checked when it changes
			// (so that one set otherwise holds no write of the agent's).
			check(fmt.Sprintf("object.metadata.?annotations.orValue({})[?'%[1]s'].orValue('') == oldObject.metadata.?annotations.orValue({})[?'%[1]s'].orValue('') || "+
				"object.metadata.?annotations.orValue({})[?'%[1]s'].orValue('').matches('^[%[2]s]{0,%[3]d}$')", nodemarks.AnnotationAgentVersion, nodemarks.AgentVersionChars, nodemarks.MaxAgentVersionLength),
				self+fmt.Sprintf(" + ' may say its version in at most %d letters, digits and . + ~ _ - (annotation %s)'", nodemarks.MaxAgentVersionLength, nodemarks.AnnotationAgentVersion)),
			check(unchangedBut("metadata", append([]string{"labels", "annotations"}, serverMetadata...)...),
				self+" + ' may change only labels and annotations of its Node\\'s metadata, not ' + "+changedBut("metadata", append([]string{"labels", "annotations"}, serverMetadata...)...)+".join(', ')"),
		},
	}, {
		// Its own Node's status: the four maintenance conditions, nothing
		// else (the kubelet's conditions and every other field as they
		// are).
		suffix: "nodestatus",
		rules:  []admv1.NamedRuleWithOperations{rule("", "nodes/status", admv1.Update)},
		variables: []admv1.Variable{
			variable("ours", "["+quoted(nodeConditions)+"]"),
			variable("others", "object.status.?conditions.orValue([]).filter(c, !(c.type in variables.ours))"),
			variable("oldOthers", "oldObject.status.?conditions.orValue([]).filter(c, !(c.type in variables.ours))"),
		},
		validations: []admv1.Validation{
			check("object.metadata.name == variables.node",
				self+" + ' may change only the status of its own Node, not that of ' + object.metadata.name"),
			check("variables.others == variables.oldOthers",
				self+" + ' may set only the conditions "+strings.Join(nodeConditions, ", ")+" in the status of its Node'"),
			check(unchangedBut("status", "conditions"),
				self+" + ' may change only the maintenance conditions in the status of its Node, not ' + "+changedBut("status", "conditions")+".join(', ')"),
			// A status write keeps the metadata it is sent (the kubelet's
			// own labels rely on it): through this door, none of it.
			check(unchangedBut("metadata", serverMetadata...),
				self+" + ' may not change the metadata of its Node through its status, not ' + "+changedBut("metadata", serverMetadata...)+".join(', ')"),
		},
	}, {
		// Leases: its own record, locks it takes or gives back, and the
		// queues' summaries.
		suffix: "leases",
		rules:  []admv1.NamedRuleWithOperations{rule("coordination.k8s.io", "leases", admv1.Create, admv1.Update, admv1.Delete)},
		variables: []admv1.Variable{
			variable("isLock", "request.name.startsWith('lock-')"),
			variable("isQueue", "request.name.startsWith('queue-')"),
			variable("isRecord", "!variables.isLock && !variables.isQueue"),
			variable("write", "request.operation != 'DELETE'"),
			variable("queueKey", "object != null ? object.metadata.?annotations[?'"+lock.AnnotationQueueKey+"'].orValue('') : ''"),
			variable("oldQueueKey", "oldObject != null ? oldObject.metadata.?annotations[?'"+lock.AnnotationQueueKey+"'].orValue('') : ''"),
			variable("annotationBytes", "object != null ? object.metadata.?annotations.orValue({}).map(k, size(bytes(k)) + size(bytes(object.metadata.annotations[k]))).sum() : 0"),
			variable("owners", "object != null ? object.metadata.?ownerReferences.orValue([]) : []"),
			variable("holder", "object != null && has(object.spec.holderIdentity) ? object.spec.holderIdentity : ''"),
			variable("oldHolder", "oldObject != null && has(oldObject.spec.holderIdentity) ? oldObject.spec.holderIdentity : ''"),
			// What a lock may go through: taken as it is, changed while
			// held, given back with its release time.
			variable("taking", "variables.isLock && request.operation == 'UPDATE' && variables.oldHolder == '' && variables.holder == variables.node"),
			variable("releasing", "variables.isLock && request.operation == 'UPDATE' && variables.oldHolder == variables.node && variables.holder == ''"),
			// Labels may be added (a lock written before its group was
			// labelled), never changed or removed.
			variable("labelsKept", "request.operation != 'UPDATE' || oldObject.metadata.?labels.orValue({}).all(k, k in object.metadata.?labels.orValue({}) && object.metadata.labels[k] == oldObject.metadata.labels[k])"),
		},
		validations: []admv1.Validation{
			check("!variables.isRecord || request.name == 'node-' + variables.node",
				self+" + ' may write only its own record node-' + variables.node + ', the lock Leases and the queue Leases, not Lease ' + request.name"),
			check("!variables.isRecord || request.operation == 'DELETE' || variables.holder == variables.node",
				"'record ' + request.name + ' must name its own node as holder, not \"' + variables.holder + '\"'"),
			// A finalizer would keep a Lease past its Node (and its owner's
			// garbage collection) until an admin removes it.
			check("!variables.write || object.metadata.?finalizers.orValue([]) == (oldObject != null ? oldObject.metadata.?finalizers.orValue([]) : [])",
				self+" + ' may not put finalizers on Lease ' + request.name"),
			// A format the installed release does not know would keep
			// every agent of the group out of its turn (docs/agent.md,
			// "Upgrading the agents"); a later release's install widens it.
			check("!variables.write || object.metadata.?annotations[?'"+lock.AnnotationFormat+"'].orValue('1') in ["+quoted(knownFormats())+"]",
				self+" + ' may mark Lease ' + request.name + ' only with a format this installation knows ("+strings.Join(knownFormats(), ", ")+"), not \"' + object.metadata.annotations['"+lock.AnnotationFormat+"'] + '\"'"),
			// Every agent caches the namespace's Leases: none may be large.
			check("!variables.write || variables.annotationBytes <= "+fmt.Sprint(MaxLeaseAnnotationBytes),
				"'the annotations of Lease ' + request.name + ' come to ' + string(variables.annotationBytes) + ' bytes; at most "+fmt.Sprint(MaxLeaseAnnotationBytes)+"'"),
			check("!variables.write || object.metadata.?labels.orValue({}).all(k, "+oneOf(leaseLabels)+")",
				self+" + ' may label Lease ' + request.name + ' only with "+strings.Join(leaseLabels, ", ")+"'"),
			// Only names the protocol makes: a policy, perhaps a group, a
			// slot below the largest concurrency (the ResourceQuota on
			// Leases bounds how many).
			check("!variables.isLock || request.name.matches('"+lockNamePattern+"')",
				"'lock names are lock-<policy>[-<group>]-<slot below "+fmt.Sprint(mpolicy.MaxConcurrency)+">, not ' + request.name"),
			// The queue's order is the order in which records reached the
			// API server: the resourceVersion of a record's creation, kept
			// in an annotation by its agent's first update. Its agent may
			// store that version, and never change it.
			check("!variables.isRecord || !variables.write || variables.queueKey == variables.oldQueueKey || (variables.oldQueueKey == '' && oldObject != null && variables.queueKey == oldObject.metadata.resourceVersion)",
				"'record ' + request.name + ': "+lock.AnnotationQueueKey+" is the resourceVersion of the record\\'s creation; it may be set once to ' + (oldObject != null ? oldObject.metadata.resourceVersion : 'the version the API server gives the record') + ', not to ' + variables.queueKey"),
			check("!variables.isLock || request.operation != 'DELETE'",
				self+" + ' may not delete lock ' + request.name"),
			check("!variables.isLock || variables.oldHolder == '' || variables.oldHolder == variables.node",
				"'lock ' + request.name + ' is held by ' + variables.oldHolder + '; ' + "+self+" + ' may neither take it over nor release it (an admin may: kustodian-ctl release ' + variables.oldHolder + ')'"),
			check("!variables.isLock || variables.holder == '' || variables.holder == variables.node",
				self+" + ' may make only itself the holder of lock ' + request.name + ', not ' + variables.holder"),
			check(`!variables.isLock || variables.holder != variables.node || size(variables.owners) == 1`,
				"'lock ' + request.name + ' held by ' + variables.node + ' must be owned by its Node alone (uid ' + variables.nodeUID + '), so that it goes with the Node'"),
			// No Lease the node writes may have another owner: one that does
			// not exist, or another Node, would keep it alive past its own.
			check(`!variables.write || variables.owners.all(r, r.apiVersion == 'v1' && r.kind == 'Node' && r.name == variables.node && r.uid == variables.nodeUID)`,
				"'Lease ' + request.name + ' may be owned only by Node ' + variables.node + ' (v1, uid ' + variables.nodeUID + ')'"),
			check("!variables.isLock || request.operation != 'CREATE' || variables.holder == variables.node",
				self+" + ' may create lock ' + request.name + ' only to hold it'"),
			check("!variables.isLock || request.operation != 'UPDATE' || variables.oldHolder != '' || variables.holder != ''",
				"'lock ' + request.name + ' is free; ' + "+self+" + ' may take it, not change it'"),
			// Beyond labels, annotations and owners (each checked above and
			// below), the metadata is as the API server has it: no
			// generateName on a create, nothing else changed on an update.
			check("request.operation != 'CREATE' || object.metadata.all(k, k in ['name', 'namespace', 'labels', 'annotations', 'ownerReferences', "+quoted(serverMetadata)+", 'uid', 'creationTimestamp'])",
				self+" + ' may create Lease ' + request.name + ' with a name, labels, annotations and owners, not ' + object.metadata.filter(k, !(k in ['name', 'namespace', 'labels', 'annotations', 'ownerReferences', "+quoted(serverMetadata)+", 'uid', 'creationTimestamp'])).join(', ')"),
			check("request.operation != 'UPDATE' || "+unchangedBut("metadata", append([]string{"labels", "annotations", "ownerReferences"}, serverMetadata...)...),
				self+" + ' may change the labels, annotations and owners of Lease ' + request.name + ', not ' + "+changedBut("metadata", append([]string{"labels", "annotations", "ownerReferences"}, serverMetadata...)...)+".join(', ')"),
			check("!variables.isLock || variables.labelsKept",
				self+" + ' may not change the labels of lock ' + request.name"),
			// A lock's group is its name's (two policies that make the same
			// name are told apart by it): its holder may not move it to
			// another group, which honest nodes would then refuse.
			check("!variables.isLock || request.operation != 'UPDATE' || !('"+lock.LabelPolicy+"' in oldObject.metadata.?labels.orValue({})) || "+
				"object.metadata.?annotations[?'"+lock.AnnotationGroup+"'].orValue('') == oldObject.metadata.?annotations[?'"+lock.AnnotationGroup+"'].orValue('')",
				self+" + ' may not change the group (annotation "+lock.AnnotationGroup+") of lock ' + request.name"),
			check("!variables.taking || object.metadata.?annotations.orValue({}) == oldObject.metadata.?annotations.orValue({})",
				self+" + ' may take lock ' + request.name + ' only as it is, its annotations unchanged'"),
			check("!variables.releasing || size("+changedKeys("annotations", "k == '"+lock.AnnotationReleasedAt+"'")+") == 0",
				self+" + ' may give lock ' + request.name + ' back changing only its annotation "+lock.AnnotationReleasedAt+"'"),
			// Agents watch the Leases labelled with a policy: a record
			// so labelled would reach every agent.
			check("!variables.isRecord || !variables.write || !('"+lock.LabelPolicy+"' in object.metadata.?labels.orValue({}))",
				"'record ' + request.name + ' may not carry the label "+lock.LabelPolicy+" (it marks lock and queue Leases)'"),
			// A queue's summary: written by a node under its own name,
			// holding nothing, owned by nothing, never deleted by a node.
			// What it says is advice among honest agents (docs/security.md).
			check("!variables.isQueue || request.name.matches('"+queueNamePattern+"')",
				"'queue names are queue-<policy>[-<group>], not ' + request.name"),
			check("!variables.isQueue || request.operation != 'DELETE'",
				self+" + ' may not delete queue ' + request.name"),
			check("!variables.isQueue || (variables.holder == '' && size(variables.owners) == 0)",
				"'queue ' + request.name + ' may have neither a holder nor owners'"),
			check("!variables.isQueue || object.metadata.?annotations[?'"+lock.AnnotationQueueBy+"'].orValue('') == variables.node",
				"'queue ' + request.name + ': "+lock.AnnotationQueueBy+" must name its writer, ' + variables.node"),
			check("!variables.isQueue || request.operation != 'UPDATE' || "+unchangedBut("spec", "renewTime"),
				self+" + ' may change only spec.renewTime of queue ' + request.name + ', not ' + "+changedBut("spec", "renewTime")+".join(', ')"),
			check("!variables.isQueue || variables.labelsKept",
				self+" + ' may not change the labels of queue ' + request.name"),
			check("!variables.isQueue || request.operation != 'UPDATE' || size("+changedKeys("annotations", oneOf([]string{lock.AnnotationQueue, lock.AnnotationQueueBy}))+") == 0",
				self+" + ' may change only the annotations "+lock.AnnotationQueue+" and "+lock.AnnotationQueueBy+" of queue ' + request.name"),
		},
	}, {
		// MaintenanceRollouts: the status subresource only (RBAC), and in
		// it every other node's entry as it was. The summary beside the
		// entries is each writer's (docs/security.md says what a
		// compromised node can make it say).
		suffix: "rollouts",
		rules:  []admv1.NamedRuleWithOperations{rule(rollout.Group, rollout.Resource+"/status", admv1.Update)},
		variables: []admv1.Variable{
			variable("others", "object.?status.?nodes.orValue([]).filter(e, e.name != variables.node)"),
			variable("oldOthers", "oldObject.?status.?nodes.orValue([]).filter(e, e.name != variables.node)"),
			// A patch campaign's set (status.patch): kept as it was;
			// claimed by this node, for the spec now, when no node holds
			// a claim of this spec (none, one of another spec, or one
			// whose node withdrew or failed); or filled once by the node
			// that claimed it (docs/security.md: what a lying first node
			// can and cannot make the others install).
			variable("hasPatch", "object.?status.?patch.hasValue()"),
			variable("hadPatch", "oldObject.?status.?patch.hasValue()"),
			variable("patchKept", "variables.hasPatch == variables.hadPatch && (!variables.hasPatch || object.status.patch == oldObject.status.patch)"),
			variable("claimable", "!variables.hadPatch || oldObject.status.patch.?signature.orValue('') != object.spec.signature || "+
				"(!has(oldObject.status.patch.resolvedAt) && !oldObject.?status.?nodes.orValue([]).exists(e, e.name == oldObject.status.patch.?resolvedOn.orValue('') && "+
				"e.state in ['Waiting', 'Running', 'RollingBack', 'Retrying', 'Succeeded']))"),
			// The claim goes with the node's place in the queue, the set
			// with its entry Succeeded: both of the set's revision.
			variable("ownEntry", "object.?status.?nodes.orValue([]).filter(e, e.name == variables.node && e.revision == object.status.patch.?revision.orValue(''))"),
			variable("claims", "variables.hasPatch && has(object.spec.patch) && object.spec.signature != '' && object.status.patch.?resolvedOn.orValue('') == variables.node && "+
				"variables.ownEntry.exists(e, e.state == 'Waiting') && "+
				"object.status.patch.?signature.orValue('') == object.spec.signature && !has(object.status.patch.resolvedAt) && !has(object.status.patch.packages)"),
			variable("fills", "variables.hasPatch && variables.hadPatch && oldObject.status.patch.?resolvedOn.orValue('') == variables.node && "+
				"oldObject.status.patch.?signature.orValue('') == object.spec.signature && !has(oldObject.status.patch.resolvedAt) && "+
				"object.status.patch.?resolvedOn.orValue('') == variables.node && object.status.patch.?signature.orValue('') == object.spec.signature && "+
				"object.status.patch.?revision.orValue('') == oldObject.status.patch.?revision.orValue('') && has(object.status.patch.resolvedAt) && "+
				"variables.ownEntry.exists(e, e.state == 'Succeeded')"),
		},
		validations: []admv1.Validation{
			check("variables.others == variables.oldOthers",
				self+" + ' may change only its own entry in status.nodes of MaintenanceRollout ' + request.name + ', not the entries of other nodes'"),
			check("variables.patchKept || (variables.claimable && variables.claims) || variables.fills",
				self+" + ' may claim status.patch of MaintenanceRollout ' + request.name + ' only as itself, with its entry Waiting, for the signed spec now (spec.signature), while no other live node holds a claim of it, and fill only its own claim, once, with its entry Succeeded'"),
		},
	}, {
		// Events: about its own Node, and the one Event of a pod its drain
		// deleted past its PodDisruptionBudget.
		suffix: "events",
		rules:  []admv1.NamedRuleWithOperations{rule("", "events", admv1.Create, admv1.Update)},
		validations: []admv1.Validation{check("(object.involvedObject.kind == 'Node' && object.involvedObject.name == variables.node) || "+
			"(object.involvedObject.kind == 'Pod' && object.?reason.orValue('') == '"+reasonPodDeletedPastPDB+"' && object.?type.orValue('') == 'Warning' && "+
			"object.?source.?host.orValue('') == variables.node && object.?message.orValue('').startsWith('deleted pod ') && size(object.?message.orValue('')) <= 1024)",
			self+" + ' may record Events only about its own Node (and, from its own host, "+reasonPodDeletedPastPDB+" about a pod it deleted), not this one about ' + object.involvedObject.kind + ' ' + object.involvedObject.name")},
	}, {
		// Pods: deleted (the policy's drain escalation) only on its own
		// Node; evictions are the Eviction API's.
		suffix: "pods",
		rules:  []admv1.NamedRuleWithOperations{rule("", "pods", admv1.Delete)},
		validations: []admv1.Validation{
			check("oldObject.spec.?nodeName.orValue('') == variables.node",
				self+" + ' may delete only pods on its own Node, not ' + oldObject.metadata.namespace + '/' + oldObject.metadata.name"),
			check("request.?options.?preconditions.?uid.orValue('') == oldObject.metadata.uid && request.?options.?gracePeriodSeconds.orValue(-1) != 0 && "+
				"request.?options.?gracePeriodSeconds.orValue(2147483647) >= oldObject.spec.?terminationGracePeriodSeconds.orValue(30)",
				self+" + ' may delete a pod only with its UID as a precondition and its own grace period, not at once or sooner'"),
		},
	},
		kuredPolicy(kuredKeys),
	}
}

// What an agent writes on its Node: its state label, the marks of its
// cordon and of its autoscaler protection, and the autoscaler's annotation.
// An admin's annotations (kustodian.io/priority, kustodian.io/hold) stay the
// admin's: a node may not move itself up the queue or lift its own hold.
var (
	nodeLabels      = []string{lock.LabelState, rollout.LabelRollouts, nodemarks.LabelKubeletEvictions}
	nodeAnnotations = []string{lock.AnnotationCordoned, nodemarks.AnnotationProtected, scaleDownDisabled, history.Annotation, nodemarks.AnnotationQuarantined, nodemarks.AnnotationAgentVersion}
	leaseLabels     = []string{lock.LabelManagedBy, lock.LabelPolicy}
)

// MaxLeaseAnnotationBytes bounds the annotations (keys and values) of a
// Lease an agent writes.
const MaxLeaseAnnotationBytes = 16384

// lockNamePattern: lock-, a policy name (lower-case letters, digits and
// '-'), perhaps a group segment (lock.GroupRef.LockName), and a slot number
// below mpolicy.MaxConcurrency.
var lockNamePattern = fmt.Sprintf(`^lock-[a-z0-9][-a-z0-9]{0,%d}-(0|[1-9][0-9]{0,%d})$`,
	mpolicy.MaxPolicyName+1+lock.MaxGroupSegment, len(fmt.Sprint(mpolicy.MaxConcurrency-1))-1)

// knownFormats are the formats of the protocol's Leases this release
// reads (lock.Format and older).
func knownFormats() []string {
	var out []string
	for f := 1; f <= lock.Format; f++ {
		out = append(out, strconv.Itoa(f))
	}
	return out
}

// queueNamePattern: queue-, a policy name, perhaps a group segment
// (lock.GroupRef.QueueName).
var queueNamePattern = fmt.Sprintf(`^queue-[a-z0-9][-a-z0-9]{0,%d}$`, mpolicy.MaxPolicyName+1+lock.MaxGroupSegment)

// scaleDownDisabled keeps the cluster autoscaler off a node in maintenance
// (a policy's autoscaler.protect): the one annotation outside kustodian.io/
// an agent may write on its Node.
const scaleDownDisabled = nodemarks.AnnotationScaleDownDisabled

// reasonPodDeletedPastPDB is the one reason of an Event about a pod an
// agent may record (the agent's ReasonPodDeletedPastPDB).
const reasonPodDeletedPastPDB = "PodDeletedPastPDB"

func ptr[T any](v T) *T { return &v }

// policyObjects are the policies and their bindings, named after the
// installation's namespace and matching only its agents' ServiceAccount.
func policyObjects(o Options) []Object {
	user := fmt.Sprintf("system:serviceaccount:%s:%s", o.Namespace, AgentServiceAccount)
	var out []Object
	keys := o.KuredLockAnnotations
	if len(keys) == 0 {
		keys = kured.LockAnnotations
	}
	// The tokens policy first: once the API server enforces any policy
	// made after it, it enforces this one too (TokenRight).
	for _, p := range append([]policy{tokenPolicy(o)}, append(policies(keys), requestPolicy())...) {
		if p.suffix != "bound" {
			p.validations = append([]admv1.Validation{boundCheck}, p.validations...)
		}
		name := PolicyName(o.Namespace, p.suffix)
		out = append(out,
			Object{GVRValidatingAdmissionPolicy, &admv1.ValidatingAdmissionPolicy{
				TypeMeta:   typeMeta("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"),
				ObjectMeta: meta(name, ""),
				Spec: admv1.ValidatingAdmissionPolicySpec{
					FailurePolicy:    ptr(admv1.Fail),
					MatchConstraints: &admv1.MatchResources{ResourceRules: p.rules},
					MatchConditions:  []admv1.MatchCondition{{Name: "kustodian-agent", Expression: fmt.Sprintf("request.userInfo.username == '%s'", user)}},
					Variables:        append(append([]admv1.Variable{}, nodeVariables...), p.variables...),
					Validations:      p.validations,
				},
			}},
			Object{gvrBinding, &admv1.ValidatingAdmissionPolicyBinding{
				TypeMeta:   typeMeta("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"),
				ObjectMeta: meta(name, ""),
				Spec: admv1.ValidatingAdmissionPolicyBindingSpec{
					PolicyName:        name,
					ValidationActions: []admv1.ValidationAction{admv1.Deny},
				},
			}})
	}
	return out
}

// nodeConditions are the Node conditions an agent sets on its own Node.
var nodeConditions = func() []string {
	var out []string
	for _, t := range nodemarks.ConditionTypes {
		out = append(out, string(t))
	}
	return out
}()

// serverMetadata are the metadata the API server writes on every update:
// no request of a node changes them of its own accord.
var serverMetadata = []string{"resourceVersion", "managedFields", "generation"}
