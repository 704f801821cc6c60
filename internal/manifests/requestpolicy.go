package manifests

import (
	admv1 "k8s.io/api/admissionregistration/v1"
)

// requestPolicy lets an agent write the status of the MaintenanceRequests
// for its own Node only, and nothing else of them: not their spec nor their
// metadata (a custom resource's status subresource keeps only the status
// it is sent; said here as well).
func requestPolicy() policy {
	self := "'node ' + variables.node"
	return policy{
		suffix: "requests",
		rules:  []admv1.NamedRuleWithOperations{rule("kustodian.io", "maintenancerequests/status", admv1.Update)},
		validations: []admv1.Validation{
			check("oldObject.spec.nodeName == variables.node",
				self+" + ' may write the status only of MaintenanceRequests for its own Node, not of ' + oldObject.metadata.name + ' for ' + oldObject.spec.nodeName"),
			check("object.spec == oldObject.spec && "+unchangedBut("metadata", serverMetadata...),
				self+" + ' may change only the status of MaintenanceRequest ' + oldObject.metadata.name"),
		},
	}
}
