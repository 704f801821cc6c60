package manifests

import (
	"fmt"
	"strconv"
	"strings"

	admv1 "k8s.io/api/admissionregistration/v1"

	"github.com/kustodian/kustodian/internal/identity"
)

// tokenPolicy lets an agent mint tokens (TokenRequest) for its own
// ServiceAccount only, bound to its own Node object only, for at most
// identity.MaxLifetime, and, when the installation knows the API server's
// audiences, for those only: the renewal of its own credentials, and
// nothing a stolen token could not already do. RBAC names the
// ServiceAccount (resourceNames); RBAC cannot see the Node a token is
// bound to, nor how long it lasts.
//
// The API server fills in the audiences before admission sees the request
// (its own, when the request names none), so a token for another audience
// (a Vault or a cloud that trusts this cluster's tokens) shows here as one
// with other audiences. An installation that does not know the API
// server's audiences (a kustomize render) refuses every renewal.
func tokenPolicy(o Options) policy {
	self := "'node ' + variables.node"
	ref := "object.spec.?boundObjectRef"
	// variables.nodeUID is never '' for a Node-bound token (boundCheck
	// refuses the others); said here all the same.
	p := policy{
		suffix: "tokens",
		rules:  []admv1.NamedRuleWithOperations{rule("", "serviceaccounts/token", admv1.Create)},
		validations: []admv1.Validation{
			check(fmt.Sprintf("request.namespace == '%s' && request.name == '%s'", o.Namespace, AgentServiceAccount),
				self+fmt.Sprintf(" + ' may mint tokens only for ServiceAccount %s/%s, not ' + request.namespace + '/' + request.name", o.Namespace, AgentServiceAccount)),
			check(ref+".?kind.orValue('') == 'Node' && "+ref+".?apiVersion.orValue('') == 'v1' && "+
				ref+".?name.orValue('') == variables.node && variables.nodeUID != '' && "+ref+".?uid.orValue('') == variables.nodeUID",
				self+" + ' may mint tokens only bound to its own Node (kind Node, apiVersion v1, name ' + variables.node + ', uid ' + variables.nodeUID + '), not to ' + "+
					ref+".?kind.orValue('nothing') + ' ' + "+ref+".?name.orValue('') + ' ' + "+ref+".?uid.orValue('')"),
			check("object.spec.?expirationSeconds.orValue(3600) <= "+strconv.FormatInt(int64(identity.MaxLifetime.Seconds()), 10),
				self+" + ' may mint tokens for at most "+identity.MaxLifetime.String()+" ("+strconv.FormatInt(int64(identity.MaxLifetime.Seconds()), 10)+
					" seconds), not ' + string(object.spec.?expirationSeconds.orValue(3600)) + ' seconds'"),
		},
	}
	if len(o.TokenAudiences) == 0 {
		// Not known: no renewal at all, rather than one for any audience.
		p.validations = append(p.validations, check("false",
			"'this installation does not know the API server\\'s token audiences, so no node may renew its token: install with kustodian-ctl install (which learns them), or give them with --token-audiences'"))
		return p
	}
	p.validations = append(p.validations, check("object.spec.?audiences.orValue([]) == ["+quoted(o.TokenAudiences)+"]",
		self+" + ' may mint tokens only for the API server ("+strings.Join(o.TokenAudiences, ", ")+"), not for ' + object.spec.?audiences.orValue([]).join(', ')"))
	return p
}
