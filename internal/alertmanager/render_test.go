package alertmanager

import (
	"strings"
	"testing"

	"github.com/kustodian/kustodian/internal/policy"
)

func TestRenderMatchers(t *testing.T) {
	f := policy.SilenceFields{Node: "node-1.example.com", Policy: "workers", Group: "zone-a"}
	for _, tc := range []struct {
		matchers []string
		want     string // the rendered matchers, or the error's text
	}{
		{[]string{`node="{{ .Node }}"`}, `[node="node-1.example.com"]`},
		{[]string{`instance=~"{{ regexQuote .Node }}(:.*)?"`, `policy!={{ .Policy }}`}, `[instance=~"node-1\\.example\\.com(:.*)?" policy!="workers"]`},
		{[]string{`zone!~"{{ .Group }}"`, `node="{{ .Node }}"`}, `[zone!~"zone-a" node="node-1.example.com"]`},
		{[]string{`zone!~"{{ .Group }}"`}, "every one matches an empty label"},
		{nil, "none"},
		{[]string{`instance=~".*"`}, "every one matches an empty label"},
		{[]string{`node="{{ .Nodes }}"`}, "can't evaluate field Nodes"},
		{[]string{`node "x"`}, "is not a matcher"},
		{[]string{`node=~"(x"`}, "missing closing )"},
	} {
		ms, err := RenderMatchers(&policy.Silence{Matchers: tc.matchers}, f)
		got := ""
		if err != nil {
			got = err.Error()
		} else {
			var parts []string
			for _, m := range ms {
				parts = append(parts, Matcher{Name: m.Name, Value: m.Value, IsRegex: m.IsRegex, IsEqual: m.IsEqual}.String())
			}
			got = "[" + strings.Join(parts, " ") + "]"
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("%q: got %s, want %s", tc.matchers, got, tc.want)
		}
	}
}
