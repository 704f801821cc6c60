package agent

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// The maintenance loop says what it did only through what its decisions
// give (decide.Effect), carried out by applyEffects: no file of the agent
// sends an Event, a notification or a history entry of its own. The
// reconcilers beside the loop (rollouts, silences) have their own door,
// an Event on this node's Node, and nothing else.
func TestEffectsHaveOneDoor(t *testing.T) {
	allowed := map[string][]string{
		"event":    {"effects.go a", "events.go a", "rollouts.go ro", "silence.go s"},
		"tell":     {"effects.go a"},
		"remember": {"effects.go a"},
		"Events":   {"events.go *"}, // the API's Events
		"Notify":   {"events.go *"}, // the notifications' sender
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(parsed, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			doors, watched := allowed[sel.Sel.Name]
			if !watched {
				return true
			}
			calls++
			recv := "*"
			if id, ok := sel.X.(*ast.Ident); ok {
				recv = id.Name
			}
			for _, d := range doors {
				file, r, _ := strings.Cut(d, " ")
				if file == f && (r == "*" || r == recv) {
					return true
				}
			}
			t.Errorf("%s: %s.%s(...): Events, notifications and history entries go through applyEffects (a decide.Effect), not from here", fset.Position(call.Pos()), recv, sel.Sel.Name)
			return true
		})
	}
	var names []string
	for n := range allowed {
		names = append(names, n)
	}
	sort.Strings(names)
	if calls < len(names) {
		t.Fatalf("found %d calls of %v in the agent's files; the check would prove nothing", calls, names)
	}
}

// The Agent is the loop and the parts it carries a plan out with, each
// the state of one concern (parts.go); a new concern is a part, not ten
// more fields beside the others.
func TestAgentHasFewParts(t *testing.T) {
	if n := reflect.TypeOf(Agent{}).NumField(); n > 30 {
		t.Errorf("Agent has %d fields; group the new ones into a part of their own (at most 30)", n)
	}
}
