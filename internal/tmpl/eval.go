package tmpl

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"text/template/parse"
	"time"
)

func (t *Template[D]) walk(b *bytes.Buffer, n parse.Node, dot any) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := t.walk(b, c, dot); err != nil {
				return err
			}
		}
	case *parse.TextNode:
		b.Write(n.Text)
	case *parse.CommentNode:
	case *parse.ActionNode:
		v, err := t.pipe(n.Pipe, dot)
		if err != nil {
			return err
		}
		fmt.Fprint(b, v)
	case *parse.IfNode:
		v, err := t.pipe(n.Pipe, dot)
		if err != nil {
			return err
		}
		if truth(v) {
			return t.walk(b, n.List, dot)
		}
		return t.walk(b, n.ElseList, dot)
	case *parse.WithNode:
		v, err := t.pipe(n.Pipe, dot)
		if err != nil {
			return err
		}
		if truth(v) {
			return t.walk(b, n.List, v)
		}
		return t.walk(b, n.ElseList, dot)
	default:
		return t.errorf(n, "%s is not supported in a %s", n, t.lang.Kind)
	}
	return nil
}

// pipe evaluates a pipeline: each command's value is the last argument of
// the next.
func (t *Template[D]) pipe(p *parse.PipeNode, dot any) (any, error) {
	var v any
	for i, c := range p.Cmds {
		var err error
		if v, err = t.command(c, dot, v, i > 0); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func (t *Template[D]) command(c *parse.CommandNode, dot, prev any, piped bool) (any, error) {
	if id, ok := c.Args[0].(*parse.IdentifierNode); ok {
		if (id.Ident == "and" || id.Ident == "or") && len(c.Args) > 1 {
			// As text/template: stop at the first argument that decides.
			var v any
			for _, a := range c.Args[1:] {
				var err error
				if v, err = t.arg(a, dot); err != nil {
					return nil, err
				}
				if truth(v) != (id.Ident == "and") {
					return v, nil
				}
			}
			if piped {
				return prev, nil
			}
			return v, nil
		}
		args := make([]any, 0, len(c.Args))
		for _, a := range c.Args[1:] {
			v, err := t.arg(a, dot)
			if err != nil {
				return nil, err
			}
			args = append(args, v)
		}
		if piped {
			args = append(args, prev)
		}
		v, err := t.call(id.Ident, args)
		if err != nil {
			return nil, t.errorf(id, "%s: %v", id.Ident, err)
		}
		return v, nil
	}
	if piped || len(c.Args) > 1 {
		return nil, t.errorf(c, "%s is not a function: it takes no arguments", c.Args[0])
	}
	return t.arg(c.Args[0], dot)
}

func (t *Template[D]) arg(n parse.Node, dot any) (any, error) {
	switch n := n.(type) {
	case *parse.DotNode:
		return dot, nil
	case *parse.FieldNode:
		d, ok := dot.(D)
		if !ok {
			return nil, t.errorf(n, "can't evaluate field %s in a %T", n.Ident[0], dot)
		}
		f, ok := t.lang.Fields[n.Ident[0]]
		if !ok || len(n.Ident) > 1 {
			return nil, t.errorf(n, "can't evaluate field %s (a %s has %s)", n, t.lang.Noun, t.lang.fieldList())
		}
		return f(d), nil
	case *parse.StringNode:
		return n.Text, nil
	case *parse.BoolNode:
		return n.True, nil
	case *parse.NumberNode:
		// As text/template reads a constant: a float when written as one
		// (2.0, 1e9), else an integer.
		isHex := strings.HasPrefix(n.Text, "0x") || strings.HasPrefix(n.Text, "0X")
		switch {
		case n.IsComplex:
		case n.IsFloat && !isHex && strings.ContainsAny(n.Text, ".eEpP"):
			return n.Float64, nil
		case n.IsInt:
			return n.Int64, nil
		case n.IsFloat:
			return n.Float64, nil
		}
		return nil, t.errorf(n, "%s: only integers and floats are numbers here", n)
	case *parse.PipeNode:
		return t.pipe(n, dot)
	}
	return nil, t.errorf(n, "%s is not supported in a %s", n, t.lang.Kind)
}

// truth is text/template's: the zero value of a basic kind is false.
func truth(v any) bool {
	switch v := v.(type) {
	case nil:
		return false
	case string:
		return v != ""
	case bool:
		return v
	case int64:
		return v != 0
	case float64:
		return v != 0
	case time.Duration:
		return v != 0
	}
	return true // a time, as text/template has it for any struct
}

// basic turns a value into one eq can compare: durations and integers
// alike, as text/template does for basic kinds; a time compares with a
// time only.
func basic(v any) any {
	switch v := v.(type) {
	case time.Duration:
		return int64(v)
	case time.Time:
		return v.UTC()
	}
	return v
}

func (t *Template[D]) call(name string, args []any) (any, error) {
	if f, ok := t.lang.Funcs[name]; ok {
		return f(args)
	}
	switch name {
	case "and", "or":
		if len(args) == 0 {
			return nil, errors.New("needs at least one argument")
		}
		for _, a := range args {
			if truth(a) != (name == "and") {
				return a, nil
			}
		}
		return args[len(args)-1], nil
	case "not":
		if len(args) != 1 {
			return nil, errors.New("takes 1 argument")
		}
		return !truth(args[0]), nil
	case "eq", "ne":
		if len(args) < 2 || (name == "ne" && len(args) != 2) {
			return nil, errors.New("compares 2 arguments (eq: the first with any of the others)")
		}
		first := basic(args[0])
		for _, a := range args[1:] {
			a = basic(a)
			if fmt.Sprintf("%T", a) != fmt.Sprintf("%T", first) {
				return nil, fmt.Errorf("cannot compare %v with %v: not of the same kind", args[0], a)
			}
			if ta, ok := a.(time.Time); ok && ta.Equal(first.(time.Time)) || !ok && a == first {
				return name == "eq", nil
			}
		}
		return name == "ne", nil
	case "len":
		if len(args) != 1 {
			return nil, errors.New("takes 1 argument")
		}
		s, ok := args[0].(string)
		if !ok {
			return nil, errors.New("takes 1 text argument")
		}
		return int64(len(s)), nil
	case "print":
		return bounded(fmt.Sprint(args...))
	case "printf":
		if len(args) == 0 {
			return nil, errors.New("its first argument is the format")
		}
		f, ok := args[0].(string)
		if !ok {
			return nil, errors.New("its first argument is the format, a text")
		}
		return bounded(fmt.Sprintf(f, args[1:]...))
	}
	return nil, fmt.Errorf("not a function of a %s", t.lang.Kind)
}

// maxLen bounds a template's text and every value it makes: a message or
// a matcher is a line or a few, and a template that grows without end
// (printf of printf...) must not take the agent's memory.
const maxLen = 64 << 10

func bounded(s string) (any, error) {
	if len(s) > maxLen {
		return nil, fmt.Errorf("makes more than %d KiB", maxLen>>10)
	}
	return s, nil
}
