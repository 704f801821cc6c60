package alertmanager

import (
	"bytes"
	"fmt"
	"regexp"
	"text/template"

	"github.com/kustodian/kustodian/internal/policy"
)

var silenceFuncs = template.FuncMap{"regexQuote": regexp.QuoteMeta}

func render(name, text string, f policy.SilenceFields) (string, error) {
	t, err := template.New(name).Option("missingkey=error").Funcs(silenceFuncs).Parse(text)
	if err != nil {
		return "", err
	}
	var b bytes.Buffer
	if err := t.Execute(&b, f); err != nil {
		return "", err
	}
	return b.String(), nil
}

// RenderMatchers renders the silence's matchers for a node. Alertmanager refuses
// a silence whose matchers all match the empty string (it would silence
// everything), and so does this.
func RenderMatchers(s *policy.Silence, f policy.SilenceFields) ([]policy.Matcher, error) {
	if len(s.Matchers) == 0 {
		return nil, fmt.Errorf("matchers: none; name at least one, such as node=\"{{ .Node }}\"")
	}
	var out []policy.Matcher
	specific := false
	for i, text := range s.Matchers {
		v, err := render(fmt.Sprintf("matchers[%d]", i), text, f)
		if err != nil {
			return nil, fmt.Errorf("matchers[%d]: %w", i, err)
		}
		m, err := policy.ParseMatcher(v)
		if err != nil {
			return nil, fmt.Errorf("matchers[%d]: %w", i, err)
		}
		specific = specific || !m.Matches("")
		out = append(out, m)
	}
	if !specific {
		return nil, fmt.Errorf("matchers: every one matches an empty label, so the silence would silence every alert; make one specific, such as node=\"{{ .Node }}\"")
	}
	return out, nil
}

// RenderLink renders the silence's link for a node; "" when unset.
func RenderLink(s *policy.Silence, f policy.SilenceFields) (string, error) {
	if s.Link == "" {
		return "", nil
	}
	return render("link", s.Link, f)
}
