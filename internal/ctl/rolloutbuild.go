package ctl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kustodian/kustodian/internal/rollout"
)

// rolloutFlags are what create builds a rollout from.
type rolloutFlags struct {
	script, rollback string
	files            []string
	selector         string
	stages           []string
	promotion        string
	soak             time.Duration
	onFailure        string
	retries          int
	backoff          time.Duration
	reboot           string
	newNodes         bool
	// A patch campaign: which updates, of which packages.
	patch            string
	include, exclude []string
	// deadline (RFC 3339, or a duration from now) and maxConcurrency.
	deadline       string
	maxConcurrency int
	signing
}

// parseStage reads a --stage: N (nodes), N% (percent), all, or a label
// selector.
func parseStage(s string) (rollout.Stage, error) {
	switch {
	case s == "all":
		return rollout.Stage{All: true}, nil
	case strings.HasSuffix(s, "%"):
		n, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
		if err != nil {
			return rollout.Stage{}, fmt.Errorf("--stage %q: a percentage is N%%", s)
		}
		return rollout.Stage{Percent: &n}, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		return rollout.Stage{Nodes: &n}, nil
	}
	sel, err := metav1.ParseToLabelSelector(s)
	if err != nil {
		return rollout.Stage{}, fmt.Errorf("--stage %q: not N, N%%, all or a label selector: %v", s, err)
	}
	return rollout.Stage{Selector: sel}, nil
}

// parseDeadline reads --deadline: a time (RFC 3339) or a duration from
// now (72h), in the future.
func parseDeadline(s string, now time.Time) (time.Time, error) {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		d, derr := time.ParseDuration(s)
		if derr != nil {
			return time.Time{}, fmt.Errorf("--deadline %q: want a time (2026-12-10T00:00:00Z) or a duration from now (72h)", s)
		}
		t = now.Add(d)
	}
	if !t.After(now) {
		return time.Time{}, fmt.Errorf("--deadline %s is not in the future", t.UTC().Format(time.RFC3339))
	}
	return t.UTC().Truncate(time.Second), nil
}

// inlineSource reads a file into an inline source with its digest.
func inlineSource(flag, path string) (rollout.Source, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return rollout.Source{}, fmt.Errorf("%s: %w", flag, err)
	}
	return rollout.Source{Inline: string(b), SHA256: rollout.SHA256(b)}, nil
}

func (f *rolloutFlags) build(namespace, name string) (*rollout.MaintenanceRollout, error) {
	r := &rollout.MaintenanceRollout{TypeMeta: metav1.TypeMeta{APIVersion: rollout.Group + "/" + rollout.Version, Kind: rollout.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	var err error
	switch {
	case f.patch != "" && (f.script != "" || f.rollback != "" || len(f.files) > 0):
		return nil, errors.New("--patch makes a patch campaign, which runs each host's own package manager: give it without --script, --rollback and --file (its rollback restores the packages it changed)")
	case f.patch == "" && (len(f.include) > 0 || len(f.exclude) > 0):
		return nil, errors.New("--include and --exclude narrow a patch campaign's packages: give --patch all or --patch security too")
	case f.patch != "":
		reboot := f.reboot
		switch reboot {
		case rollout.RebootAuto:
			reboot = rollout.PatchRebootIfRequired // the flag's default: reboot when the host needs it
		case rollout.PatchRebootIfRequired, rollout.RebootNever:
		default:
			return nil, fmt.Errorf("--reboot %q: a patch campaign reboots ifRequired (the default) or never", f.reboot)
		}
		r.Spec.Patch = &rollout.PatchSpec{Updates: f.patch, Include: f.include, Exclude: f.exclude, Reboot: reboot}
	default:
		if r.Spec.Script, err = inlineSource("--script", f.script); err != nil {
			return nil, err
		}
		r.Spec.Reboot = f.reboot
	}
	if f.rollback != "" {
		rb, err := inlineSource("--rollback", f.rollback)
		if err != nil {
			return nil, err
		}
		r.Spec.RollbackScript = &rb
	}
	for _, spec := range f.files {
		fname, path, ok := strings.Cut(spec, "=")
		if !ok {
			fname, path = filepath.Base(spec), spec
		}
		src, err := inlineSource("--file "+spec, path)
		if err != nil {
			return nil, err
		}
		r.Spec.Files = append(r.Spec.Files, rollout.File{Name: fname, Source: src})
	}
	if f.selector != "" {
		if r.Spec.NodeSelector, err = metav1.ParseToLabelSelector(f.selector); err != nil {
			return nil, fmt.Errorf("--selector %q: %v", f.selector, err)
		}
	}
	for _, s := range f.stages {
		st, err := parseStage(s)
		if err != nil {
			return nil, err
		}
		r.Spec.Stages = append(r.Spec.Stages, st)
	}
	r.Spec.Promotion.Mode = f.promotion
	if f.soak > 0 {
		r.Spec.Promotion.Soak = &metav1.Duration{Duration: f.soak}
	}
	r.Spec.OnFailure = rollout.OnFailure{Action: f.onFailure, Retries: f.retries}
	if f.backoff > 0 {
		r.Spec.OnFailure.Backoff = &metav1.Duration{Duration: f.backoff}
	}
	if !f.newNodes {
		r.Spec.NewNodes = &f.newNodes
	}
	if f.deadline != "" {
		t, err := parseDeadline(f.deadline, time.Now())
		if err != nil {
			return nil, err
		}
		r.Spec.Deadline = &metav1.Time{Time: t}
	}
	if f.maxConcurrency != 0 {
		r.Spec.MaxConcurrency = &f.maxConcurrency
	}
	return r, rollout.Check(name, r.Spec)
}
