package rights

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Table is docs/security-rights.yaml.
type Table struct {
	Identity string `json:"identity"`
	Rights   []Row  `json:"rights"`
	// Untried are the field paths no probe changes, each with the reason.
	Untried map[string]string `json:"untried"`
}

// Row is one write: a resource (and subresource), a verb, the object it is
// tried on, and the field paths it may change ("(all)": judged whole).
type Row struct {
	Resource string   `json:"resource"`
	Verb     string   `json:"verb"`
	Object   string   `json:"object"`
	Changes  []string `json:"changes"`
}

// NotTried reports whether the table lists path among the paths no probe
// changes (an entry ending in * stands for every path it begins).
func (t Table) NotTried(path string) bool {
	for p := range t.Untried {
		if p == path || strings.HasSuffix(p, "*") && strings.HasPrefix(path, strings.TrimSuffix(p, "*")) {
			return true
		}
	}
	return false
}

// Whole is a row's change for a write judged as a whole (an eviction, a
// delete, a question).
const Whole = "(all)"

// ReadTable reads the table, refusing unknown keys.
func ReadTable(b []byte) (Table, error) {
	var t Table
	if err := yaml.UnmarshalStrict(b, &t); err != nil {
		return Table{}, err
	}
	if len(t.Rights) == 0 {
		return Table{}, fmt.Errorf("no rights listed")
	}
	return t, nil
}

// The markers between which docs/security.md holds the rendered table.
const (
	BeginMarker = "<!-- rights table: generated from docs/security-rights.yaml by make docs -->"
	EndMarker   = "<!-- end of rights table -->"
)

// Render is the table in Markdown.
func Render(t Table) string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n\nWho: %s.\n\n", BeginMarker, t.Identity)
	b.WriteString("| resource | verb | object | may change |\n|---|---|---|---|\n")
	for _, r := range t.Rights {
		changes := "nothing (refused)"
		switch {
		case len(r.Changes) == 1 && r.Changes[0] == Whole:
			changes = "allowed (judged whole)"
		case len(r.Changes) > 0:
			var cs []string
			for _, c := range r.Changes {
				cs = append(cs, "`"+c+"`")
			}
			changes = strings.Join(cs, ", ")
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.Resource, r.Verb, r.Object, changes)
	}
	b.WriteString("\nNot tried, and why:\n\n")
	keys := make([]string, 0, len(t.Untried))
	for k := range t.Untried {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "- `%s`: %s\n", k, strings.TrimSpace(t.Untried[k]))
	}
	b.WriteString("\n" + EndMarker)
	return b.String()
}

// Splice puts the rendered table into doc between the markers.
func Splice(doc, rendered string) (string, error) {
	i := strings.Index(doc, BeginMarker)
	j := strings.Index(doc, EndMarker)
	if i < 0 || j < i {
		return "", fmt.Errorf("the document has no %q ... %q", BeginMarker, EndMarker)
	}
	return doc[:i] + rendered + doc[j+len(EndMarker):], nil
}
