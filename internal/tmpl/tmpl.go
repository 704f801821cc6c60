package tmpl

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"text/template/parse"
)

// Lang is a small template language: Go's template syntax, read by
// text/template/parse and evaluated here over the fields of one type of
// data (D) alone. Kustodian's agent does not use text/template itself:
// its evaluator looks up methods by name at run time, which makes Go's
// linker keep every exported method of every type in the binary (about
// half of it), and those pages stay resident in an agent that waits for
// weeks.
//
// What a template may use: text; the fields Fields names ({{.Node}});
// {{.}} inside with; if, with, else and else if; the functions and, or,
// not, eq, ne, len, print and printf, and those of Funcs; parentheses and
// pipelines ({{.Node | printf "%q"}}); comments and {{- trimming -}}.
// Anything else (range, define, template, block, variables, methods such
// as .Time.Format) is refused when the template is read.
type Lang[D any] struct {
	// Kind names the templates in errors ("notification template"); Noun
	// names the data ("a notification has .Node ...").
	Kind, Noun string
	// Fields are the names a template may give after the dot, and how D
	// answers each.
	Fields map[string]func(D) any
	// Funcs are functions beyond the built-in ones.
	Funcs map[string]func(args []any) (any, error)
	// Sample is the data a template is tried on when it is read, down
	// every branch, so that a mistake in a branch rarely taken is refused
	// at once.
	Sample D
}

// Template is one template of a Lang.
type Template[D any] struct {
	lang *Lang[D]
	name string
	tree *parse.Tree
}

// builtins are the functions every template may call (call says what
// they do).
var builtins = map[string]bool{"and": true, "or": true, "not": true, "eq": true, "ne": true, "len": true, "print": true, "printf": true}

func (l *Lang[D]) fieldList() string {
	names := make([]string, 0, len(l.Fields))
	for n := range l.Fields {
		names = append(names, "."+n)
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}

func (l *Lang[D]) funcNames() string {
	names := make([]string, 0, len(builtins)+len(l.Funcs))
	for f := range builtins {
		names = append(names, f)
	}
	for f := range l.Funcs {
		names = append(names, f)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// Parse reads a template named name, checks every part of it and tries
// it on the sample data down every branch.
func (l *Lang[D]) Parse(name, text string) (*Template[D], error) {
	known := make(map[string]any, len(builtins)+len(l.Funcs))
	for f := range builtins {
		known[f] = f // the parser only asks whether a name is there
	}
	for f := range l.Funcs {
		known[f] = f
	}
	trees, err := parse.Parse(name, text, "", "", known)
	if err != nil {
		return nil, err
	}
	t := &Template[D]{lang: l, name: name, tree: trees[name]}
	if len(trees) != 1 || t.tree == nil {
		return nil, fmt.Errorf("template: %s: define and block are not supported in a %s", name, l.Kind)
	}
	if err := t.check(t.tree.Root, true); err != nil {
		return nil, err
	}
	if err := t.tryAll(&bytes.Buffer{}, t.tree.Root, l.Sample); err != nil {
		return nil, err
	}
	return t, nil
}

// tryAll renders n on sample data down every branch, taken or not (inside
// a with, the dot is the pipeline's value even when it is empty), so that
// a function given the wrong arguments in a branch the sample does not
// take is refused at start, not when its event comes.
func (t *Template[D]) tryAll(b *bytes.Buffer, n parse.Node, dot any) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := t.tryAll(b, c, dot); err != nil {
				return err
			}
		}
		return nil
	case *parse.IfNode:
		if _, err := t.pipe(n.Pipe, dot); err != nil {
			return err
		}
		if err := t.tryAll(b, n.List, dot); err != nil {
			return err
		}
		return t.tryAll(b, n.ElseList, dot)
	case *parse.WithNode:
		v, err := t.pipe(n.Pipe, dot)
		if err != nil {
			return err
		}
		if err := t.tryAll(b, n.List, v); err != nil {
			return err
		}
		return t.tryAll(b, n.ElseList, dot)
	}
	return t.walk(b, n, dot)
}

// Render is the template's text for d.
func (t *Template[D]) Render(d D) (string, error) {
	var b bytes.Buffer
	if err := t.walk(&b, t.tree.Root, d); err != nil {
		return "", err
	}
	if b.Len() > maxLen {
		return "", fmt.Errorf("template: %s: the text is longer than %d KiB", t.name, maxLen>>10)
	}
	return b.String(), nil
}

func (t *Template[D]) errorf(n parse.Node, format string, args ...any) error {
	loc, _ := t.tree.ErrorContext(n)
	return fmt.Errorf("template: %s: %s", loc, fmt.Sprintf(format, args...))
}

// check refuses, before any message is sent, what Render does not know;
// data says whether the dot is Data there (else it is a value, inside a
// with).
func (t *Template[D]) check(n parse.Node, data bool) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := t.check(c, data); err != nil {
				return err
			}
		}
		return nil
	case *parse.TextNode, *parse.CommentNode:
		return nil
	case *parse.ActionNode:
		return t.checkPipe(n.Pipe, data)
	case *parse.IfNode:
		return t.checkBranch(&n.BranchNode, data, data)
	case *parse.WithNode:
		// Inside, the dot is what the pipeline gave: Data only for {{with .}}.
		inner := data && len(n.Pipe.Cmds) == 1 && len(n.Pipe.Cmds[0].Args) == 1 && n.Pipe.Cmds[0].Args[0].Type() == parse.NodeDot
		return t.checkBranch(&n.BranchNode, inner, data)
	default:
		return t.errorf(n, "%s is not supported in a %s (text, fields, if, with, else and the functions %s are)", n, t.lang.Kind, t.lang.funcNames())
	}
}

func (t *Template[D]) checkBranch(b *parse.BranchNode, inner, data bool) error {
	if err := t.checkPipe(b.Pipe, data); err != nil {
		return err
	}
	if err := t.check(b.List, inner); err != nil {
		return err
	}
	return t.check(b.ElseList, data)
}

func (t *Template[D]) checkPipe(p *parse.PipeNode, data bool) error {
	if len(p.Decl) > 0 {
		return t.errorf(p, "variables are not supported in a %s", t.lang.Kind)
	}
	for ci, c := range p.Cmds {
		for i, a := range c.Args {
			switch a := a.(type) {
			case *parse.FieldNode:
				if err := t.checkField(a, data); err != nil {
					return err
				}
				if i == 0 && (len(c.Args) > 1 || ci > 0) {
					return t.errorf(a, "%s is a field, not a function: it takes no arguments", a)
				}
			case *parse.IdentifierNode:
				if i != 0 {
					return t.errorf(a, "%s must be called first in its command, or in parentheses", a.Ident)
				}
			case *parse.PipeNode:
				if err := t.checkPipe(a, data); err != nil {
					return err
				}
			case *parse.DotNode, *parse.StringNode, *parse.NumberNode, *parse.BoolNode:
			default:
				return t.errorf(a, "%s is not supported in a %s", a, t.lang.Kind)
			}
		}
		if _, fn := c.Args[0].(*parse.IdentifierNode); !fn && (len(c.Args) > 1 || ci > 0) {
			return t.errorf(c, "%s is not a function: it takes no arguments, and nothing can be piped into it", c.Args[0])
		}
	}
	return nil
}

func (t *Template[D]) checkField(f *parse.FieldNode, data bool) error {
	if !data {
		return t.errorf(f, "can't evaluate field %s here: inside with, the dot is the value, not the %s", f.Ident[0], t.lang.Noun)
	}
	if _, ok := t.lang.Fields[f.Ident[0]]; !ok {
		return t.errorf(f, "can't evaluate field %s (a %s has %s)", f.Ident[0], t.lang.Noun, t.lang.fieldList())
	}
	if len(f.Ident) > 1 {
		return t.errorf(f, "%s: fields of fields and methods are not supported in a %s", f, t.lang.Kind)
	}
	return nil
}
