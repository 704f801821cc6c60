package policy

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Effective is the policy a node falls under and its group there.
type Effective struct {
	// Name is the MaintenancePolicy's name, or DefaultName.
	Name string
	Spec Spec
	// Group is the node's group: the value of the policy's groupBy label on
	// the node; "" when the policy has no groupBy (one group).
	Group string
	// Schedule is Spec's windows, parsed.
	Schedule Schedule
	// Err, when set, says why no policy can be applied to the node (two
	// policies of equal precedence, an invalid policy, a node without the
	// groupBy label): the node must not go until an admin fixes it.
	Err error
}

// Default is the built-in policy: group default, one slot, always open, no
// blockers (the behaviour of the first release).
func Default() Effective {
	return Effective{Name: DefaultName}
}

// Resolve picks the policy for a node with the given labels: among the
// policies that select it, the one of highest precedence. No policy: the
// built-in default. The result depends only on its inputs, so every agent
// that sees the same objects resolves the same way.
func Resolve(policies []*MaintenancePolicy, nodeLabels map[string]string) Effective {
	var matched []*MaintenancePolicy
	for _, p := range policies {
		if p.unreadable != nil {
			return Effective{Name: p.Name, Err: fmt.Errorf("MaintenancePolicy %s cannot be read (%v); fix or delete it", p.Name, p.unreadable)}
		}
		sel, err := selector(p.Spec.NodeSelector)
		if err != nil {
			// An invalid selector cannot say which nodes it means: it
			// holds every node, rather than letting them go unruled.
			return Effective{Name: p.Name, Err: fmt.Errorf("MaintenancePolicy %s: spec.nodeSelector: %w", p.Name, err)}
		}
		if sel.Matches(labels.Set(nodeLabels)) {
			matched = append(matched, p)
		}
	}
	if len(matched) == 0 {
		return Default()
	}
	sort.Slice(matched, func(i, j int) bool {
		if matched[i].Spec.Precedence != matched[j].Spec.Precedence {
			return matched[i].Spec.Precedence > matched[j].Spec.Precedence
		}
		return matched[i].Name < matched[j].Name
	})
	p := matched[0]
	e := Effective{Name: p.Name, Spec: p.Spec}
	if len(matched) > 1 && matched[1].Spec.Precedence == p.Spec.Precedence {
		e.Err = fmt.Errorf("MaintenancePolicies %s and %s both select this node with precedence %d; give one a higher spec.precedence", p.Name, matched[1].Name, p.Spec.Precedence)
		return e
	}
	if err := Validate(p); err != nil {
		e.Err = err
		return e
	}
	e.Schedule, _ = ParseSchedule(p.Spec.Windows, p.Spec.ExcludeDates) // checked by Validate
	if key := p.Spec.GroupBy; key != "" {
		v, ok := nodeLabels[key]
		if !ok || v == "" {
			e.Err = fmt.Errorf("MaintenancePolicy %s groups nodes by label %s, which this node lacks; label the node or change spec.groupBy", p.Name, key)
			return e
		}
		e.Group = v
	}
	return e
}

func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// MaxPolicyName bounds a policy's name, so that its lock names stay valid.
const MaxPolicyName = 40

// MaxConcurrency bounds a policy's concurrency, and so the slot numbers of
// its locks.
const MaxConcurrency = 1000

// Validate checks what the CRD's schema and CEL rules check, for policies
// that reached the agent without them (an older CRD): a policy that does
// not pass holds its nodes with the reason.
func Validate(p *MaintenancePolicy) error {
	bad := func(field string, err error) error {
		return fmt.Errorf("MaintenancePolicy %s: %s: %w", p.Name, field, err)
	}
	if len(validation.IsDNS1123Label(p.Name)) > 0 || len(p.Name) > MaxPolicyName {
		return bad("metadata.name", fmt.Errorf("must be lower-case letters, digits and '-', at most %d characters", MaxPolicyName))
	}
	if p.Name == DefaultName {
		return bad("metadata.name", fmt.Errorf("%q is the built-in policy of nodes no policy selects; choose another name", DefaultName))
	}
	s := p.Spec
	if _, err := selector(s.NodeSelector); err != nil {
		return bad("spec.nodeSelector", err)
	}
	if s.Concurrency < 0 || s.Concurrency > MaxConcurrency {
		return bad("spec.concurrency", fmt.Errorf("must be between 1 and %d, got %d", MaxConcurrency, s.Concurrency))
	}
	if s.GroupBy != "" {
		if errs := validation.IsQualifiedName(s.GroupBy); len(errs) > 0 {
			return bad("spec.groupBy", fmt.Errorf("%q is not a label key: %s", s.GroupBy, strings.Join(errs, "; ")))
		}
	}
	if _, err := ParseSchedule(s.Windows, s.ExcludeDates); err != nil {
		return fmt.Errorf("MaintenancePolicy %s: spec.%w", p.Name, err)
	}
	if s.Spacing != nil && (s.Spacing.Duration < 0 || s.Spacing.Duration > 8760*time.Hour) {
		return bad("spec.spacing", fmt.Errorf("must be between 0 and a year (8760h)"))
	}
	if s.Blockers.PodSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(s.Blockers.PodSelector); err != nil {
			return bad("spec.blockers.podSelector", err)
		}
	}
	if pr := s.Blockers.Prometheus; pr != nil {
		if !strings.HasPrefix(pr.URL, "http://") && !strings.HasPrefix(pr.URL, "https://") {
			return bad("spec.blockers.prometheus.url", fmt.Errorf("%q is not an http:// or https:// URL", pr.URL))
		}
		if _, err := regexp.Compile(pr.AlertFilterRegexp); err != nil {
			return bad("spec.blockers.prometheus.alertFilterRegexp", err)
		}
	}
	for i, e := range s.Drain.Escalate {
		if e.Action != EscalateDeletePods {
			return bad(fmt.Sprintf("spec.drain.escalate[%d].action", i), fmt.Errorf("%q is not %s", e.Action, EscalateDeletePods))
		}
		if e.NamespaceSelector == nil {
			return bad(fmt.Sprintf("spec.drain.escalate[%d].namespaceSelector", i), fmt.Errorf("is required ({} selects every namespace)"))
		}
		if _, err := metav1.LabelSelectorAsSelector(e.NamespaceSelector); err != nil {
			return bad(fmt.Sprintf("spec.drain.escalate[%d].namespaceSelector", i), err)
		}
	}
	if q := s.Drain.Quarantine; q != nil && q.MaxNodes < 0 {
		return bad("spec.drain.quarantine.maxNodes", fmt.Errorf("must be at least 1"))
	}
	if field, err := validateAlertmanager(s); err != nil {
		return bad(field, err)
	}
	if mu := s.Health.MaxUnavailable; mu != nil {
		v, err := intstr.GetScaledValueFromIntOrPercent(mu, 100, true)
		if err != nil || v < 1 || (mu.Type == intstr.String && v > 100) {
			return bad("spec.health.maxUnavailable", fmt.Errorf("%q is not a number of nodes (at least 1) or a percentage from 1%% to 100%%", mu.String()))
		}
	}
	if s.Health.BlockedAfter != nil && s.Health.BlockedAfter.Duration < 0 {
		return bad("spec.health.blockedAfter", fmt.Errorf("must not be negative"))
	}
	return nil
}

// MaxUnavailable is how many of total nodes may be unavailable at once; -1
// for no limit. A percentage rounds up, as a PodDisruptionBudget's does, so
// that a small policy can still make progress.
func (s Spec) MaxUnavailable(total int) int {
	if s.Health.MaxUnavailable == nil {
		return -1
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(s.Health.MaxUnavailable, total, true)
	if err != nil {
		return 0
	}
	return n
}
