package alertmanager

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/kustodian/kustodian/internal/policy"
	"github.com/kustodian/kustodian/internal/tmpl"
)

// silenceLang is the language of a silence's matchers and link: Go's
// template syntax over the node's fields, evaluated by internal/tmpl (the
// agent does not link text/template), with regexQuote.
var silenceLang = tmpl.Lang[policy.SilenceFields]{
	Kind: "silence template",
	Noun: "silence",
	Fields: map[string]func(policy.SilenceFields) any{
		"Node":   func(f policy.SilenceFields) any { return f.Node },
		"Policy": func(f policy.SilenceFields) any { return f.Policy },
		"Group":  func(f policy.SilenceFields) any { return f.Group },
	},
	Funcs:  map[string]func([]any) (any, error){"regexQuote": regexQuote},
	Sample: policy.SilenceFields{Node: "node-1", Policy: "default", Group: "default"},
}

func regexQuote(args []any) (any, error) {
	if len(args) != 1 {
		return nil, errors.New("takes 1 argument")
	}
	s, ok := args[0].(string)
	if !ok {
		return nil, errors.New("takes 1 text argument")
	}
	return regexp.QuoteMeta(s), nil
}

func render(name, text string, f policy.SilenceFields) (string, error) {
	t, err := silenceLang.Parse(name, text)
	if err != nil {
		return "", err
	}
	return t.Render(f)
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
