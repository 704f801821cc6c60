package alertmanager

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"text/template"

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

// A silence's templates render as text/template renders them:
// text/template, which the agent does not link, is the judge.
func TestSilenceTemplatesRenderAsTextTemplate(t *testing.T) {
	funcs := template.FuncMap{"regexQuote": regexp.QuoteMeta}
	for _, f := range []policy.SilenceFields{
		{Node: "node-1.example.com", Policy: "workers", Group: "zone-a"},
		{Node: "n[2]", Policy: "", Group: "default"},
	} {
		for _, text := range []string{
			`node="{{ .Node }}"`,
			`instance=~"{{ regexQuote .Node }}(:.*)?"`,
			`instance=~"{{ .Node | regexQuote }}"`,
			`policy="{{ if .Policy }}{{ .Policy }}{{ else }}default{{ end }}"`,
			`group=~"{{ printf "%s|%s" (regexQuote .Group) (regexQuote .Node) }}"`,
			`{{- with .Policy }}policy="{{ . }}"{{ else }}node="{{ $.Node }}"{{ end -}}`,
		} {
			judge, err := template.New("judge").Option("missingkey=error").Funcs(funcs).Parse(text)
			if err != nil {
				t.Fatalf("the judge cannot read %q: %v", text, err)
			}
			var want bytes.Buffer
			if err := judge.Execute(&want, f); err != nil {
				t.Fatalf("the judge cannot render %q: %v", text, err)
			}
			got, err := render("matchers[0]", text, f)
			if strings.Contains(text, "$") {
				// Variables are refused (text/template has $ for the data).
				if err == nil || !strings.Contains(err.Error(), "not supported") {
					t.Errorf("%q: %q, %v; want it refused", text, got, err)
				}
				continue
			}
			if err != nil || got != want.String() {
				t.Errorf("%q on %+v: %q, %v; text/template says %q", text, f, got, err, want.String())
			}
		}
	}
}
