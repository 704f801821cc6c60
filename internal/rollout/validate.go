package rollout

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The names the agent gives the scripts in the rollout's directory: no
// file may take them.
const (
	ScriptName   = "script"
	RollbackName = "rollback"
)

// MaxRetries bounds onFailure.retries.
const MaxRetries = 10

var (
	hexDigest = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)
	// fileName: a name that the manifest's lines cannot confuse (no space,
	// no newline) and that stays in the rollout's directory.
	fileName = regexp.MustCompile(`^[A-Za-z0-9._-]{1,255}$`)
	// rolloutName: as the CRD says; it names the job on each host.
	rolloutName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$`)
)

// MaxBackoff bounds onFailure.backoff and what it doubles to.
const MaxBackoff = 24 * time.Hour

// Validate lists every problem of a rollout's spec, each naming its
// field; the CRD's schema refuses most of them at kubectl apply already.
func Validate(s Spec) []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	source := func(field string, src Source) {
		switch {
		case src.Inline != "" && src.ConfigMap != nil:
			add("%s: inline and configMap are both set: set one", field)
		case src.Inline == "" && src.ConfigMap == nil:
			add("%s: neither inline nor configMap is set: set one", field)
		case src.ConfigMap != nil && (src.ConfigMap.Name == "" || src.ConfigMap.Key == ""):
			add("%s.configMap: name and key are both required", field)
		}
		if !hexDigest.MatchString(src.SHA256) {
			add("%s.sha256: %q is not a SHA-256 in hex (sha256sum FILE)", field, src.SHA256)
		}
	}
	switch {
	case s.Patch != nil && (s.Script != Source{}):
		add("spec: script and patch are both set: a rollout runs a script or installs package updates, not both")
	case s.Patch != nil:
		errs = append(errs, ValidatePatch("spec.patch", *s.Patch)...)
		if s.RollbackScript != nil || len(s.Files) > 0 {
			add("spec: a patch campaign has no rollbackScript or files: its rollback restores the packages it changed")
		}
	default:
		source("spec.script", s.Script)
	}
	if s.MaxConcurrency != nil && *s.MaxConcurrency < 1 {
		add("spec.maxConcurrency: %d: want 1 or more", *s.MaxConcurrency)
	}
	if s.RollbackScript != nil {
		source("spec.rollbackScript", *s.RollbackScript)
	}
	seen := map[string]bool{}
	for i, f := range s.Files {
		field := fmt.Sprintf("spec.files[%d]", i)
		switch {
		case !fileName.MatchString(f.Name) || f.Name == "." || f.Name == "..":
			add("%s.name: %q is not a plain file name (letters, digits, '.', '_' and '-')", field, f.Name)
		case f.Name == ScriptName || f.Name == RollbackName:
			add("%s.name: %q is the script's own name: choose another", field, f.Name)
		case seen[f.Name]:
			add("%s.name: %q is there twice", field, f.Name)
		}
		seen[f.Name] = true
		source(field, f.Source)
	}
	switch s.Reboot {
	case "", RebootAuto, RebootNever:
	default:
		add("spec.reboot: %q: want auto or never", s.Reboot)
	}
	for i, st := range s.Stages {
		field := fmt.Sprintf("spec.stages[%d]", i)
		set := 0
		for _, b := range []bool{st.Nodes != nil, st.Percent != nil, st.Selector != nil, st.All} {
			if b {
				set++
			}
		}
		if set != 1 {
			add("%s: set exactly one of nodes, percent, selector and all (%d set)", field, set)
		}
		if st.Nodes != nil && *st.Nodes < 1 {
			add("%s.nodes: %d: want 1 or more", field, *st.Nodes)
		}
		if st.Percent != nil && (*st.Percent < 1 || *st.Percent > 100) {
			add("%s.percent: %d: want 1 to 100", field, *st.Percent)
		}
		if st.Selector != nil {
			if _, err := metav1.LabelSelectorAsSelector(st.Selector); err != nil {
				add("%s.selector: %v", field, err)
			}
		}
	}
	if s.NodeSelector != nil {
		if _, err := metav1.LabelSelectorAsSelector(s.NodeSelector); err != nil {
			add("spec.nodeSelector: %v", err)
		}
	}
	if n := len(StagesOf(s)); s.Promoted < 0 || s.Promoted >= n {
		add("spec.promoted: %d: want 0 to %d (the rollout has %d stages)", s.Promoted, n-1, n)
	}
	switch s.Promotion.Mode {
	case "", PromotionManual, PromotionAuto:
	default:
		add("spec.promotion.mode: %q: want manual or auto", s.Promotion.Mode)
	}
	if s.Promotion.Soak != nil && s.Promotion.Soak.Duration < 0 {
		add("spec.promotion.soak: %s is negative", s.Promotion.Soak.Duration)
	}
	switch s.OnFailure.Action {
	case "", FailureStop:
		if s.OnFailure.Retries != 0 {
			add("spec.onFailure.retries: %d without action: retry", s.OnFailure.Retries)
		}
	case FailureRetry:
		if s.OnFailure.Retries < 1 || s.OnFailure.Retries > MaxRetries {
			add("spec.onFailure.retries: %d: want 1 to %d with action: retry", s.OnFailure.Retries, MaxRetries)
		}
	default:
		add("spec.onFailure.action: %q: want stop or retry", s.OnFailure.Action)
	}
	if b := s.OnFailure.Backoff; b != nil && (b.Duration < 0 || b.Duration > MaxBackoff) {
		add("spec.onFailure.backoff: %s: want 0 to %s", b.Duration, MaxBackoff)
	}
	return errs
}

// Check is Validate's problems as one error, nil when there are none.
func Check(name string, s Spec) error {
	errs := Validate(s)
	if !rolloutName.MatchString(name) {
		errs = append([]error{fmt.Errorf("metadata.name: %q: lower-case letters, digits and '-', at most 40 characters", name)}, errs...)
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("MaintenanceRollout %s: %w", name, errors.Join(errs...))
}

// packagePattern is what a pattern of package names may hold: Debian's
// and RPM's name characters and the shell's wildcards.
var packagePattern = regexp.MustCompile(`^[A-Za-z0-9.+_:*?\[\]!^-]{1,128}$`)

// ValidatePatch lists the problems of a patch campaign's spec, naming each
// field under prefix (spec.patch; -- for the command line's flags).
func ValidatePatch(prefix string, s PatchSpec) []error {
	var errs []error
	switch s.Updates {
	case "", UpdatesAll, UpdatesSecurity:
	default:
		errs = append(errs, fmt.Errorf("%s.updates: %q: want all or security", prefix, s.Updates))
	}
	switch s.Reboot {
	case "", PatchRebootIfRequired, PatchRebootNever:
	default:
		errs = append(errs, fmt.Errorf("%s.reboot: %q: want ifRequired or never", prefix, s.Reboot))
	}
	for _, f := range []struct {
		name     string
		patterns []string
	}{{"include", s.Include}, {"exclude", s.Exclude}} {
		for i, p := range f.patterns {
			if !packagePattern.MatchString(p) {
				errs = append(errs, fmt.Errorf("%s.%s[%d]: %q is not a pattern of package names (letters, digits, '.', '+', '-', ':', and * ? [...])", prefix, f.name, i, p))
			} else if _, err := path.Match(p, ""); err != nil {
				errs = append(errs, fmt.Errorf("%s.%s[%d]: %q: %v", prefix, f.name, i, p, err))
			}
		}
	}
	return errs
}
