package policy

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// Matcher is one Alertmanager label matcher: name="v", name!="v",
// name=~"re", name!~"re".
type Matcher struct {
	Name    string
	Value   string
	IsRegex bool
	IsEqual bool
}

var matcherSyntax = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*(.*?)\s*$`)

// ParseMatcher reads a matcher as Alertmanager's amtool writes one; the
// value may be quoted (Go's quoting) or bare.
func ParseMatcher(s string) (Matcher, error) {
	m := matcherSyntax.FindStringSubmatch(s)
	if m == nil {
		return Matcher{}, fmt.Errorf("%q is not a matcher: write name=\"value\" (or !=, =~, !~)", s)
	}
	value := m[3]
	if strings.HasPrefix(value, `"`) {
		if len(value) < 2 || !strings.HasSuffix(value, `"`) || strings.HasSuffix(value, `\"`) && !strings.HasSuffix(value, `\\"`) {
			return Matcher{}, fmt.Errorf("%q: the value %s has no closing quote", s, value)
		}
		value = unescape(value[1 : len(value)-1])
	}
	out := Matcher{Name: m[1], Value: value, IsRegex: strings.HasSuffix(m[2], "~"), IsEqual: !strings.HasPrefix(m[2], "!")}
	if out.IsRegex {
		if _, err := regexp.Compile("^(?:" + value + ")$"); err != nil {
			return Matcher{}, fmt.Errorf("%q: %w", s, err)
		}
	}
	return out, nil
}

// Matches reports whether the matcher matches value, anchored as
// Alertmanager anchors its regexps.
func (m Matcher) Matches(value string) bool {
	ok := m.Value == value
	if m.IsRegex {
		ok = regexp.MustCompile("^(?:" + m.Value + ")$").MatchString(value)
	}
	return ok == m.IsEqual
}

// templateAction is a Go template action: validation stands a plain word
// in for each, since rendering is the agent's (kustodian-ctl links no
// template engine).
var templateAction = regexp.MustCompile(`\{\{.*?\}\}`)

// checkMatchers checks what can be checked of a silence's matchers before
// they are rendered: each is a matcher, and one is specific.
func (s *Silence) checkMatchers() error {
	if len(s.Matchers) == 0 {
		return fmt.Errorf("matchers: none; name at least one, such as node=\"{{ .Node }}\"")
	}
	specific := false
	for i, text := range s.Matchers {
		m, err := ParseMatcher(templateAction.ReplaceAllString(text, "node-1"))
		if err != nil {
			return fmt.Errorf("matchers[%d]: %w", i, err)
		}
		specific = specific || !m.Matches("")
	}
	if !specific {
		return fmt.Errorf("matchers: every one matches an empty label, so the silence would silence every alert; make one specific, such as node=\"{{ .Node }}\"")
	}
	return nil
}

// validateAlertmanager checks spec.alertmanager and
// spec.blockers.alertmanager, with a sample node for the templates.
func validateAlertmanager(s Spec) (string, error) {
	am := s.Alertmanager
	if am == nil {
		if s.Blockers.Alertmanager != nil {
			return "spec.blockers.alertmanager", fmt.Errorf("needs spec.alertmanager.url, the Alertmanager to ask")
		}
		return "", nil
	}
	if !strings.HasPrefix(am.URL, "http://") && !strings.HasPrefix(am.URL, "https://") {
		return "spec.alertmanager.url", fmt.Errorf("%q is not an http:// or https:// URL", am.URL)
	}
	if u, err := url.Parse(am.URL); err != nil || u.User != nil {
		// The URL is in logs, Events and the record: credentials in it
		// would be shown to all.
		return "spec.alertmanager.url", fmt.Errorf("is not a URL without credentials: each host lists the URL with its credentials file in alertmanager.endpoints of its configuration")
	}
	if len(am.Credentials) > 0 {
		return "spec.alertmanager.credentials", fmt.Errorf("credentials are host configuration: list %s with its credentials file in alertmanager.endpoints of each host's /etc/kustodian/config.yaml, and remove them from the policy", am.URL)
	}
	if si := am.Silence; si != nil {
		if err := si.checkMatchers(); err != nil {
			return "spec.alertmanager.silence", err
		}
		if si.Duration != nil && (si.Duration.Duration < 0 || si.Duration.Duration > 24*60*60e9) {
			return "spec.alertmanager.silence.duration", fmt.Errorf("must be between 0 (the default, 30m) and 24h")
		}
	}
	if b := s.Blockers.Alertmanager; b != nil {
		for i, m := range b.Matchers {
			if _, err := ParseMatcher(m); err != nil {
				return fmt.Sprintf("spec.blockers.alertmanager.matchers[%d]", i), err
			}
		}
		if _, err := regexp.Compile(b.AlertFilterRegexp); err != nil {
			return "spec.blockers.alertmanager.alertFilterRegexp", err
		}
	}
	return "", nil
}

// unescape reads a quoted value as Alertmanager does: \" \\ and \n stand
// for their characters, any other backslash stays (a regexp's \.).
func unescape(v string) string {
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '\\' && i+1 < len(v) {
			switch v[i+1] {
			case '"', '\\':
				b.WriteByte(v[i+1])
				i++
				continue
			case 'n':
				b.WriteByte('\n')
				i++
				continue
			}
		}
		b.WriteByte(v[i])
	}
	return b.String()
}
