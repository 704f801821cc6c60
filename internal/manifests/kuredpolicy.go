package manifests

import (
	"fmt"
	"strings"

	admv1 "k8s.io/api/admissionregistration/v1"
)

// kuredPolicy lets an agent write Kured's lock on Kured's DaemonSet, under
// each of keys: add or remove this node's own entry, in the one form
// kured.Entry writes (alone, or as the one entry of a lock of several
// owners it creates), and leave every other byte of it as it is (CEL
// cannot parse JSON; it can compare strings).
func kuredPolicy(keys []string) policy {
	self := "'node ' + variables.node"
	quoted := make([]string, len(keys))
	for i, k := range keys {
		quoted[i] = "'" + k + "'"
	}
	p := policy{
		suffix: "kured",
		rules:  []admv1.NamedRuleWithOperations{rule("apps", "daemonsets", admv1.Update)},
		variables: []admv1.Variable{
			variable("annotations", changedKeys("annotations", "k in ["+strings.Join(quoted, ", ")+"]")),
			variable("prefix", `'{"nodeID":"kustodian:' + variables.node + '","metadata":{"unschedulable":'`),
		},
		validations: []admv1.Validation{
			check("object.spec == oldObject.spec && size(variables.annotations) == 0 && "+unchangedBut("metadata", append([]string{"annotations"}, serverMetadata...)...),
				self+" + ' may change only the annotations "+strings.Join(keys, ", ")+" of DaemonSet ' + request.namespace + '/' + request.name"),
		},
	}
	for n, key := range keys {
		v := func(name string) string { return fmt.Sprintf("variables.%s%d", name, n) }
		lock, oldLock, oldBase, base, i, j := v("lock"), v("oldLock"), v("oldBase"), v("base"), v("i"), v("j")
		name := func(s string) string { return strings.TrimPrefix(s, "variables.") }
		p.variables = append(p.variables,
			variable(name(lock), "object.metadata.?annotations[?'"+key+"'].orValue('')"),
			variable(name(oldLock), "oldObject.metadata.?annotations[?'"+key+"'].orValue('')"),
			// A lock of several owners without its closing "]}" (and "null"
			// read as an empty list): where an entry is appended.
			variable(name(oldBase), `!`+oldLock+`.startsWith('{"maxOwners":') ? '' :
`+oldLock+`.endsWith(',"locks":null}') ? `+oldLock+`.substring(0, size(`+oldLock+`) - 5) + '[' :
`+oldLock+`.endsWith(']}') ? `+oldLock+`.substring(0, size(`+oldLock+`) - 2) : ''`),
			variable(name(base), oldBase+" + ("+oldBase+".endsWith('[') ? '' : ',')"),
			// Where this node's entry starts and ends in the old value.
			variable(name(i), oldLock+".indexOf(variables.prefix)"),
			variable(name(j), i+` < 0 ? -1 : `+oldLock+`.indexOf('"TTL":0}', `+i+`) + 8`),
		)
		r := strings.NewReplacer("@LOCK", lock, "@OLD", oldLock, "@BASEOLD", oldBase, "@BASE", base, "@I", i, "@J", j)
		p.validations = append(p.validations, check(r.Replace(`@LOCK == @OLD ||
((@OLD == '' || @OLD.startsWith('{"nodeID":"",')) && `+mine("@LOCK")+`) ||
(@OLD == '' && @LOCK.matches('^\\{"maxOwners":([2-9]|[1-9][0-9]{1,3}),"locks":\\[') && @LOCK.endsWith(']}') &&
 object.spec.template.spec.containers.exists(c, (c.?command.orValue([]) + c.?args.orValue([])).exists(a,
   a == '--concurrency=' + @LOCK.find('^\\{"maxOwners":[0-9]+').substring(13))) &&
 `+mine(`@LOCK.substring(size(@LOCK.find('^\\{"maxOwners":[0-9]+,"locks":\\[')), size(@LOCK) - 2)`)+`) ||
(@LOCK == '' && `+mine("@OLD")+`) ||
(@BASEOLD != '' && @I < 0 && @OLD.split('"nodeID":').size() - 1 < int(@OLD.find('^\\{"maxOwners":[0-9]{1,4}').substring(13)) &&
 @LOCK.startsWith(@BASE) && @LOCK.endsWith(']}') && size(@LOCK) > size(@BASE) + 2 &&
 `+mine("@LOCK.substring(size(@BASE), size(@LOCK) - 2)")+`) ||
(@OLD.startsWith('{"maxOwners":') && @I > 0 && @J > @I + 8 && @J < size(@OLD) &&
 `+mine("@OLD.substring(@I, @J)")+` && (
 (@OLD.substring(@I - 1, @I) == ',' && @LOCK == @OLD.substring(0, @I - 1) + @OLD.substring(@J)) ||
 (@OLD.substring(@J, @J + 1) == ',' && @LOCK == @OLD.substring(0, @I) + @OLD.substring(@J + 1)) ||
 (@OLD.substring(@I - 1, @I) == '[' && @OLD.substring(@J, @J + 1) == ']' && @LOCK == @OLD.substring(0, @I) + @OLD.substring(@J))))`),
			self+` + ' may change Kured\'s lock (annotation `+key+`) only to add its own entry kustodian:' + variables.node + ' where there is room, or to remove it, leaving every other entry as it is'`))
	}
	return p
}

// mine is a CEL condition: the string s is this node's entry in Kured's lock
// exactly as kured.Entry writes it, with a time Kured can parse (a date that
// does not exist would make Kured's and every agent's reading of the lock
// fail).
func mine(s string) string {
	created := fmt.Sprintf(`%[1]s.substring(%[1]s.indexOf('"created":"') + 11, %[1]s.indexOf('"created":"') + 31)`, s)
	return fmt.Sprintf(`(%[1]s.startsWith(variables.prefix) && %[1]s.substring(size(variables.prefix)).matches('^(true|false)\\},"created":"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]Z","TTL":0\\}$') &&
 timestamp(%[2]s) > timestamp('2000-01-01T00:00:00Z'))`, s, created)
}
