package manifests

import (
	corev1 "k8s.io/api/core/v1"
	flowv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// DefaultMaxLeases is the default bound on the Leases of an installation's
// namespace: a record per node in maintenance and the locks of every group,
// for fleets of a few thousand nodes (5000 Leases of at most 16 KiB of
// annotations each: about 80 MiB, within the agent's MemoryMax). Every agent caches them, so their
// number (and the policy's bound on their size) bounds its memory.
const DefaultMaxLeases = 5000

var (
	gvrResourceQuota              = corev1.SchemeGroupVersion.WithResource("resourcequotas")
	gvrFlowSchema                 = flowv1.SchemeGroupVersion.WithResource("flowschemas")
	gvrPriorityLevel              = flowv1.SchemeGroupVersion.WithResource("prioritylevelconfigurations")
	leaseCount                    = corev1.ResourceName("count/" + schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}.String())
	agentPriorityPrecedence int32 = 8000 // before the built-in service-accounts schema (9000)
)

// limitObjects bound what the agents' credentials can cost: a
// ResourceQuota on the namespace's Leases (none with MaxLeases < 0), and
// an API Priority and Fairness priority level of their own, so that every
// agent together (a compromised one included) gets a bounded share of the
// API server and never crowds out its other clients.
func limitObjects(o Options, name string) []Object {
	var out []Object
	max := o.MaxLeases
	if max == 0 {
		max = DefaultMaxLeases
	}
	if max > 0 {
		out = append(out, Object{gvrResourceQuota, &corev1.ResourceQuota{TypeMeta: typeMeta("v1", "ResourceQuota"), ObjectMeta: meta("kustodian-leases", o.Namespace),
			Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{leaseCount: *resource.NewQuantity(int64(max), resource.DecimalSI)}}}})
	}
	shares, lendable, borrowing := int32(10), int32(0), int32(0)
	queues, hand, length := int32(16), int32(4), int32(50)
	out = append(out,
		Object{gvrPriorityLevel, &flowv1.PriorityLevelConfiguration{TypeMeta: typeMeta("flowcontrol.apiserver.k8s.io/v1", "PriorityLevelConfiguration"), ObjectMeta: meta(name, ""),
			Spec: flowv1.PriorityLevelConfigurationSpec{Type: flowv1.PriorityLevelEnablementLimited, Limited: &flowv1.LimitedPriorityLevelConfiguration{
				NominalConcurrencyShares: &shares, LendablePercent: &lendable, BorrowingLimitPercent: &borrowing,
				LimitResponse: flowv1.LimitResponse{Type: flowv1.LimitResponseTypeQueue, Queuing: &flowv1.QueuingConfiguration{Queues: queues, HandSize: hand, QueueLengthLimit: length}},
			}}}},
		Object{gvrFlowSchema, &flowv1.FlowSchema{TypeMeta: typeMeta("flowcontrol.apiserver.k8s.io/v1", "FlowSchema"), ObjectMeta: meta(name, ""),
			Spec: flowv1.FlowSchemaSpec{
				PriorityLevelConfiguration: flowv1.PriorityLevelConfigurationReference{Name: name},
				MatchingPrecedence:         agentPriorityPrecedence,
				DistinguisherMethod:        &flowv1.FlowDistinguisherMethod{Type: flowv1.FlowDistinguisherMethodByUserType},
				Rules: []flowv1.PolicyRulesWithSubjects{{
					Subjects: []flowv1.Subject{{Kind: flowv1.SubjectKindServiceAccount, ServiceAccount: &flowv1.ServiceAccountSubject{Namespace: o.Namespace, Name: AgentServiceAccount}}},
					ResourceRules: []flowv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
						ClusterScope: true, Namespaces: []string{"*"}}},
					NonResourceRules: []flowv1.NonResourcePolicyRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
				}},
			}}})
	return out
}
