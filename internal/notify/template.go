package notify

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"text/template/parse"
)

// Template is the message of one event: Go's template syntax, read by
// text/template/parse and evaluated here over Data alone. The agent does
// not use text/template itself: its evaluator looks up methods by name at
// run time, which makes Go's linker keep every exported method of every
// type in the binary (about half of it), and those pages stay resident in
// an agent that waits for weeks.
//
// What a notification template may use: text; the fields of Data
// ({{.Node}}); {{.}} inside with; if, with, else and else if; the
// functions and, or, not, eq, ne, len, print and printf; parentheses and
// pipelines ({{.Node | printf "%q"}}); comments and {{- trimming -}}.
// Anything else (range, define, template, block, variables, methods such
// as .Time.Format) is refused when the template is read.
type Template struct {
	name string
	tree *parse.Tree
}

// fields are the names a template may give after the dot, and how Data
// answers each.
var fields = map[string]func(Data) any{
	"Event":     func(d Data) any { return string(d.Event) },
	"Node":      func(d Data) any { return d.Node },
	"Reason":    func(d Data) any { return d.Reason },
	"Message":   func(d Data) any { return d.Message },
	"Group":     func(d Data) any { return d.Group },
	"Policy":    func(d Data) any { return d.Policy },
	"Time":      func(d Data) any { return d.Time },
	"Requested": func(d Data) any { return d.Requested },
	"Duration":  func(d Data) any { return d.Duration },
}

// funcs are the functions a template may call (call says what they do).
var funcs = map[string]bool{"and": true, "or": true, "not": true, "eq": true, "ne": true, "len": true, "print": true, "printf": true}

func fieldList() string {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, "."+n)
	}
	sort.Strings(names)
	return strings.Join(names, " ")
}

// ParseTemplate reads the template of an event, checks every part of it
// and tries it on sample data down every branch.
func ParseTemplate(ev Event, text string) (*Template, error) {
	known := make(map[string]any, len(funcs))
	for f := range funcs {
		known[f] = f // the parser only asks whether a name is there
	}
	trees, err := parse.Parse(string(ev), text, "", "", known)
	if err != nil {
		return nil, err
	}
	t := &Template{name: string(ev), tree: trees[string(ev)]}
	if len(trees) != 1 || t.tree == nil {
		return nil, fmt.Errorf("template: %s: define and block are not supported in a notification template", ev)
	}
	if err := t.check(t.tree.Root, true); err != nil {
		return nil, err
	}
	try := sample
	try.Event = ev
	if err := t.tryAll(&bytes.Buffer{}, t.tree.Root, try); err != nil {
		return nil, err
	}
	return t, nil
}

// tryAll renders n on sample data down every branch, taken or not (inside
// a with, the dot is the pipeline's value even when it is empty), so that
// a function given the wrong arguments in a branch the sample does not
// take is refused at start, not when its event comes.
func (t *Template) tryAll(b *bytes.Buffer, n parse.Node, dot any) error {
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

// Render is the message for d.
func (t *Template) Render(d Data) (string, error) {
	var b bytes.Buffer
	if err := t.walk(&b, t.tree.Root, d); err != nil {
		return "", err
	}
	if b.Len() > maxMessage {
		return "", fmt.Errorf("template: %s: the message is longer than %d KiB", t.name, maxMessage>>10)
	}
	return b.String(), nil
}

func (t *Template) errorf(n parse.Node, format string, args ...any) error {
	loc, _ := t.tree.ErrorContext(n)
	return fmt.Errorf("template: %s: %s", loc, fmt.Sprintf(format, args...))
}

// check refuses, before any message is sent, what Render does not know;
// data says whether the dot is Data there (else it is a value, inside a
// with).
func (t *Template) check(n parse.Node, data bool) error {
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
		return t.errorf(n, "%s is not supported in a notification template (text, fields, if, with, else and the functions %s are)", n, funcNames())
	}
}

func (t *Template) checkBranch(b *parse.BranchNode, inner, data bool) error {
	if err := t.checkPipe(b.Pipe, data); err != nil {
		return err
	}
	if err := t.check(b.List, inner); err != nil {
		return err
	}
	return t.check(b.ElseList, data)
}

func (t *Template) checkPipe(p *parse.PipeNode, data bool) error {
	if len(p.Decl) > 0 {
		return t.errorf(p, "variables are not supported in a notification template")
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
				return t.errorf(a, "%s is not supported in a notification template", a)
			}
		}
		if _, fn := c.Args[0].(*parse.IdentifierNode); !fn && (len(c.Args) > 1 || ci > 0) {
			return t.errorf(c, "%s is not a function: it takes no arguments, and nothing can be piped into it", c.Args[0])
		}
	}
	return nil
}

func (t *Template) checkField(f *parse.FieldNode, data bool) error {
	if !data {
		return t.errorf(f, "can't evaluate field %s here: inside with, the dot is the value, not the notification", f.Ident[0])
	}
	if _, ok := fields[f.Ident[0]]; !ok {
		return t.errorf(f, "can't evaluate field %s (a notification has %s)", f.Ident[0], fieldList())
	}
	if len(f.Ident) > 1 {
		return t.errorf(f, "%s: fields of fields and methods are not supported in a notification template", f)
	}
	return nil
}

func funcNames() string {
	names := make([]string, 0, len(funcs))
	for f := range funcs {
		names = append(names, f)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
