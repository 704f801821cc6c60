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
		"event":    {"effects.go a", "rollouts.go ro", "rolloutpace.go ro", "silence.go s"},
		"tell":     {"effects.go a"},
		"remember": {"effects.go a"},
		"Events":   {"effects.go *"}, // the API's Events
		"Notify":   {"effects.go *"}, // the notifications' sender
	}
	calls := 0
	inspectAgent(t, func(f string, pos func(ast.Node) token.Position, n ast.Node) {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return
		}
		doors, watched := allowed[sel.Sel.Name]
		if !watched {
			return
		}
		calls++
		recv := "*"
		if id, ok := sel.X.(*ast.Ident); ok {
			recv = id.Name
		}
		for _, d := range doors {
			file, r, _ := strings.Cut(d, " ")
			if file == f && (r == "*" || r == recv) {
				return
			}
		}
		t.Errorf("%s: %s.%s(...): Events, notifications and history entries go through applyEffects (a decide.Effect), not from here", pos(call), recv, sel.Sel.Name)
	})
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

// Every write the agent makes to its Node goes through nodeWriter
// (nodes.go); the cordon goes through the drain.
func TestNodeWritesHaveOneDoor(t *testing.T) {
	writes := map[string]bool{"Patch": true, "Update": true, "UpdateStatus": true, "Create": true, "Delete": true, "Apply": true, "ApplyStatus": true}
	found := 0
	inspectAgent(t, func(f string, pos func(ast.Node) token.Position, n ast.Node) {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || !writes[sel.Sel.Name] {
			return
		}
		inner, ok := sel.X.(*ast.CallExpr)
		if !ok {
			return
		}
		if isel, ok := inner.Fun.(*ast.SelectorExpr); !ok || isel.Sel.Name != "Nodes" {
			return
		}
		found++
		if f != "nodes.go" {
			t.Errorf("%s: Nodes().%s: the agent writes its Node through nodeWriter (nodes.go) only", pos(call), sel.Sel.Name)
		}
	})
	if found == 0 {
		t.Fatal("found no Node write at all; the check would prove nothing")
	}
}

// The lock protocol's objects are written through their doors (locks.go,
// records.go),
// which keep the agent's view of its own writes: a write that bypasses
// them is one the next decision does not see.
func TestLeaseWritesHaveTheirDoors(t *testing.T) {
	found := 0
	inspectAgent(t, func(f string, pos func(ast.Node) token.Position, n ast.Node) {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return
		}
		inner, ok := sel.X.(*ast.SelectorExpr)
		if !ok {
			return
		}
		door := inner.Sel.Name == "store" || (inner.Sel.Name == "view" && (sel.Sel.Name == "Wrote" || sel.Sel.Name == "Deleted"))
		if !door {
			return
		}
		owner, ok := inner.X.(*ast.SelectorExpr)
		if !ok || (owner.Sel.Name != "locks" && owner.Sel.Name != "records") {
			if id, ok := inner.X.(*ast.Ident); !ok || (id.Name != "l" && id.Name != "r") {
				return
			}
		}
		found++
		if f != "locks.go" && f != "records.go" {
			t.Errorf("%s: %s.%s: locks and summaries are written through lockSide (locks.go), records through recordSide (records.go), which keep the agent's view of their writes", pos(sel), inner.Sel.Name, sel.Sel.Name)
		}
	})
	if found == 0 {
		t.Fatal("found no use of the lock doors at all; the check would prove nothing")
	}
}

// inspectAgent calls visit with every node of the agent's own files (not
// its tests), and the file it is in.
func inspectAgent(t *testing.T, visit func(file string, pos func(ast.Node) token.Position, n ast.Node)) {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	pos := func(n ast.Node) token.Position { return fset.Position(n.Pos()) }
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(parsed, func(n ast.Node) bool {
			if n != nil {
				visit(f, pos, n)
			}
			return true
		})
	}
}
