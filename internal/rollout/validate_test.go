package rollout

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestValidate(t *testing.T) {
	digest := SHA256([]byte("true\n"))
	ok := Spec{Script: Source{Inline: "true\n", SHA256: digest}}
	if errs := Validate(ok); len(errs) != 0 {
		t.Fatalf("a minimal rollout: %v", errs)
	}
	campaign := Spec{Patch: &PatchSpec{Updates: UpdatesSecurity, Exclude: []string{"kubelet", "containerd*", "lib?[0-9]"}, Reboot: PatchRebootIfRequired}, MaxConcurrency: intp(5)}
	if errs := Validate(campaign); len(errs) != 0 {
		t.Fatalf("a patch campaign: %v", errs)
	}
	for _, tc := range []struct {
		name   string
		change func(*Spec)
		want   string
	}{
		{"no script", func(s *Spec) { s.Script.Inline = "" }, "spec.script: neither"},
		{"two sources", func(s *Spec) { s.Script.ConfigMap = &KeySource{Name: "c", Key: "k"} }, "spec.script: inline and configMap"},
		{"bad digest", func(s *Spec) { s.Script.SHA256 = "abc" }, "spec.script.sha256"},
		{"a file with a path", func(s *Spec) { s.Files = []File{{Name: "../etc/passwd", Source: ok.Script}} }, "spec.files[0].name"},
		{"a file name with a newline", func(s *Spec) { s.Files = []File{{Name: "a sha256:x\nfile b", Source: ok.Script}} }, "spec.files[0].name"},
		{"a backoff of a year", func(s *Spec) {
			s.OnFailure = OnFailure{Action: FailureRetry, Retries: 1, Backoff: &metav1.Duration{Duration: 8760 * time.Hour}}
		}, "spec.onFailure.backoff"},
		{"a file named script", func(s *Spec) { s.Files = []File{{Name: "script", Source: ok.Script}} }, "the script's own name"},
		{"a file twice", func(s *Spec) { s.Files = []File{{Name: "a", Source: ok.Script}, {Name: "a", Source: ok.Script}} }, "spec.files[1].name"},
		{"reboot", func(s *Spec) { s.Reboot = "sometimes" }, "spec.reboot"},
		{"a stage with two fields", func(s *Spec) { s.Stages = []Stage{{Nodes: intp(1), All: true}} }, "spec.stages[0]: set exactly one"},
		{"an empty stage", func(s *Spec) { s.Stages = []Stage{{}} }, "spec.stages[0]: set exactly one"},
		{"percent", func(s *Spec) { s.Stages = []Stage{{Percent: intp(120)}} }, "spec.stages[0].percent"},
		{"nodes", func(s *Spec) { s.Stages = []Stage{{Nodes: intp(0)}} }, "spec.stages[0].nodes"},
		{"a bad selector", func(s *Spec) {
			s.Stages = []Stage{{Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Near"}}}}}
		}, "spec.stages[0].selector"},
		{"promoted too far", func(s *Spec) { s.Promoted = 2 }, "spec.promoted: 2: want 0 to 1"},
		{"promotion mode", func(s *Spec) { s.Promotion.Mode = "soon" }, "spec.promotion.mode"},
		{"retries without retry", func(s *Spec) { s.OnFailure.Retries = 2 }, "without action: retry"},
		{"retry without retries", func(s *Spec) { s.OnFailure.Action = FailureRetry }, "spec.onFailure.retries: 0"},
		{"failure action", func(s *Spec) { s.OnFailure.Action = "panic" }, "spec.onFailure.action"},
		{"a script and a patch", func(s *Spec) { s.Patch = &PatchSpec{} }, "script and patch are both set"},
		{"a patch with a rollback script", func(s *Spec) {
			s.Patch, s.Script, s.RollbackScript = &PatchSpec{}, Source{}, &ok.Script
		}, "no rollbackScript or files"},
		{"updates", func(s *Spec) { s.Patch, s.Script = &PatchSpec{Updates: "some"}, Source{} }, "spec.patch.updates"},
		{"patch reboot", func(s *Spec) { s.Patch, s.Script = &PatchSpec{Reboot: "auto"}, Source{} }, "spec.patch.reboot"},
		{"a pattern with a space", func(s *Spec) { s.Patch, s.Script = &PatchSpec{Exclude: []string{"kube let"}}, Source{} }, "spec.patch.exclude[0]"},
		{"a broken pattern", func(s *Spec) { s.Patch, s.Script = &PatchSpec{Include: []string{"lib["}}, Source{} }, "spec.patch.include[0]"},
		{"max concurrency", func(s *Spec) { s.MaxConcurrency = intp(0) }, "spec.maxConcurrency"},
	} {
		s := ok
		s.Files, s.Stages = nil, nil
		tc.change(&s)
		err := Check("fix", s)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}

func TestBounded(t *testing.T) {
	long := strings.Repeat("x", 5000)
	var lines []string
	for i := 0; i < 15; i++ {
		lines = append(lines, long)
	}
	e := Bounded(NodeStatus{Message: long, LastLines: lines})
	if n := len([]rune(e.Message)); n != MaxMessage {
		t.Errorf("message of %d characters", n)
	}
	if len(e.LastLines) != MaxLastLine || len([]rune(e.LastLines[0])) != MaxLine {
		t.Errorf("%d lines, the first of %d characters", len(e.LastLines), len([]rune(e.LastLines[0])))
	}
}
