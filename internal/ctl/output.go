package ctl

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"
)

// Output formats of -o that are Kustodian's own tables.
const (
	outputTable = ""
	outputWide  = "wide"
	outputJSON  = "json"
	outputYAML  = "yaml"
	outputName  = "name"
)

// output is -o and --no-headers, as kubectl has them: the command's
// tables ("" and wide), and through k8s.io/cli-runtime's printers json,
// yaml, jsonpath (and jsonpath-file, jsonpath-as-json), kubectl's
// custom-columns (ours, on client-go's JSONPath), and name. Go templates
// are left out: text/template looks methods up by name, which keeps the
// linker from dropping any unused method and made the binary 20 MB
// bigger.
type output struct {
	Format    string
	NoHeaders bool
	SortBy    string // a JSONPath on each row, as kubectl's --sort-by
	// Template is --template, the JSONPath of a bare -o jsonpath (or
	// jsonpath-file's file); AllowMissing is --allow-missing-template-keys.
	Template     string
	AllowMissing bool
	wide         bool  // the command has a wide table
	shape        shape // what the command prints without -o
	pictures     bool  // the command draws -o html and -o svg (pictures.go)
}

// shape is what a command prints without -o, which decides the flags of
// its output: only a table of rows sorts (--sort-by) and has columns of
// one's own (custom-columns); only a table has headers to leave out.
type shape int

const (
	rows        shape = iota // a table, a row per item (status, queue, ...)
	objectTable              // one object, shown as a table (rollout status)
	object                   // one object, shown as a line (rollout create)
)

// addOutput registers -o, --no-headers, --sort-by, --template and
// --allow-missing-template-keys on a command that prints rows; wide: it
// has a wide table too.
func addOutput(cmd *cobra.Command, wide bool) *output {
	return addOutputOf(cmd, rows, wide)
}

// addOutputOf registers the output flags a command of that shape has.
func addOutputOf(cmd *cobra.Command, sh shape, wide bool) *output {
	o := &output{wide: wide, shape: sh}
	formats := []string{}
	if wide {
		formats = append(formats, outputWide)
	}
	formats = append(formats, outputJSON, outputYAML, outputName, "jsonpath=...", "jsonpath-file=...", "jsonpath-as-json=...")
	if sh == rows {
		formats = append(formats, "custom-columns=...", "custom-columns-file=...")
	}
	without := "a table"
	if sh == object {
		without = "one line"
	}
	cmd.Flags().StringVarP(&o.Format, "output", "o", "", "output format: "+strings.Join(formats, ", ")+" (without -o: "+without+")")
	if sh != object {
		cmd.Flags().BoolVar(&o.NoHeaders, "no-headers", false, "print tables and custom-columns without their header line")
	}
	if sh == rows {
		cmd.Flags().StringVar(&o.SortBy, "sort-by", "", "sort the rows by the value of this JSONPath in each (as in -o json), e.g. '{.node}' or .waitingSeconds")
	}
	cmd.Flags().StringVar(&o.Template, "template", "", "the JSONPath (or the file holding it) of -o jsonpath, -o jsonpath-file or -o jsonpath-as-json given without one")
	cmd.Flags().BoolVar(&o.AllowMissing, "allow-missing-template-keys", true, "ignore a field or map key that a JSONPath names and a document lacks")
	// The formats that take no argument complete whole; the others up to
	// their "=" (no space after it).
	var complete []string
	for _, f := range formats {
		complete = append(complete, strings.TrimSuffix(f, "..."))
	}
	_ = cmd.RegisterFlagCompletionFunc("output", func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		d := cobra.ShellCompDirectiveNoFileComp
		if strings.Contains(toComplete, "=") {
			return nil, cobra.ShellCompDirectiveDefault // a template or a file
		}
		for _, f := range complete {
			if strings.HasSuffix(f, "=") && strings.HasPrefix(f, toComplete) {
				d |= cobra.ShellCompDirectiveNoSpace
			}
		}
		return matching(complete, nil, toComplete), d
	})
	return o
}

// Table is whether -o asks for one of the command's own tables.
func (o *output) Table() bool { return o.Format == outputTable || o.Format == outputWide }

// Wide is whether -o asks for the wide table.
func (o *output) Wide() bool { return o.Format == outputWide }

// errNoGoTemplates refuses kubectl's Go template formats in one line.
func errNoGoTemplates(format string) error {
	return fmt.Errorf("-o %s: kustodian-ctl has no Go templates; use -o jsonpath=... (the same fields, e.g. '{.items[*].node}') or -o json with jq", format)
}

// printer is the printer of a format other than the tables, name and
// custom-columns.
func (o *output) printer() (printers.ResourcePrinter, error) {
	switch o.Format {
	case outputJSON:
		return &printers.JSONPrinter{}, nil
	case outputYAML:
		return &printers.YAMLPrinter{}, nil
	}
	kind, path, given := strings.Cut(o.Format, "=")
	switch kind {
	case "jsonpath", "jsonpath-file", "jsonpath-as-json":
	case "go-template", "go-template-file", "template", "templatefile":
		return nil, errNoGoTemplates(kind)
	default:
		return nil, fmt.Errorf("unknown output format %q; use wide, json, yaml, name, jsonpath=..., jsonpath-file=..., custom-columns=... or custom-columns-file=...", o.Format)
	}
	if !given {
		path = o.Template
	}
	if path == "" {
		return nil, fmt.Errorf("-o %s: give the JSONPath, as -o %s=... or --template", kind, kind)
	}
	if kind == "jsonpath-file" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("-o jsonpath-file: %w", err)
		}
		path = string(b)
	}
	p, err := printers.NewJSONPathPrinter(path)
	if err != nil {
		return nil, fmt.Errorf("-o %s: %v", o.Format, oneLine(err))
	}
	p.AllowMissingKeys(o.AllowMissing)
	if kind == "jsonpath-as-json" {
		p.EnableJSONOutput(true)
	}
	return p, nil
}

// oneLine keeps an error's message on one line.
func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// Check refuses a format the command does not print, in one line.
func (o *output) Check() error {
	if o.SortBy != "" {
		if _, err := relaxedPath("--sort-by", o.SortBy); err != nil {
			return err
		}
	}
	switch {
	case o.Format == outputWide && !o.wide:
		return fmt.Errorf("unknown output format %q: this command has no wide table", o.Format)
	case o.Table(), o.Format == outputName:
		return nil
	case o.Picture() && o.pictures:
		return nil
	case o.Picture():
		return fmt.Errorf("-o %s: this command draws no timeline; plan, history and rollout status|report do", o.Format)
	case strings.HasPrefix(o.Format, "custom-columns") && o.shape != rows:
		return fmt.Errorf("-o %s: this command prints one object, not rows; use -o jsonpath=... (e.g. '{.metadata.name}') or -o yaml", o.Format)
	case strings.HasPrefix(o.Format, "custom-columns"):
		_, err := o.customColumns()
		return err
	}
	if _, err := o.printer(); err != nil {
		return err
	}
	return nil
}

// customColumns reads -o custom-columns=HEADER:PATH,... or
// custom-columns-file=FILE (a line of headers, a line of paths), as
// kubectl does.
func (o *output) customColumns() (*columnsPrinter, error) {
	var headers, paths []string
	if file, ok := strings.CutPrefix(o.Format, "custom-columns-file="); ok {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("-o custom-columns-file: %w", err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) != 2 {
			return nil, fmt.Errorf("-o custom-columns-file=%s: want two lines, the headers and the paths", file)
		}
		headers, paths = strings.Fields(lines[0]), strings.Fields(lines[1])
		if len(headers) != len(paths) {
			return nil, fmt.Errorf("-o custom-columns-file=%s: %d headers for %d paths", file, len(headers), len(paths))
		}
	} else {
		spec, _ := strings.CutPrefix(o.Format, "custom-columns=")
		if spec == "" || spec == o.Format {
			return nil, fmt.Errorf("-o %s: give the columns, as custom-columns=NODE:.node,RESULT:.result", o.Format)
		}
		for _, col := range strings.Split(spec, ",") {
			h, path, ok := strings.Cut(col, ":")
			if !ok || h == "" || path == "" {
				return nil, fmt.Errorf("-o %s: column %q is not HEADER:PATH", o.Format, col)
			}
			headers, paths = append(headers, h), append(paths, path)
		}
	}
	p := &columnsPrinter{headers: headers, noHeaders: o.NoHeaders}
	for i, path := range paths {
		jp, err := relaxedPath("-o "+o.Format+": column "+headers[i], path)
		if err != nil {
			return nil, err
		}
		p.paths = append(p.paths, jp)
	}
	return p, nil
}

// columnsPrinter is kubectl's custom-columns: a row per item of a list (a
// row for an object that is not one), each cell the values its JSONPath
// finds, joined by commas, <none> when none.
type columnsPrinter struct {
	headers   []string
	paths     []*jsonpath.JSONPath
	noHeaders bool
}

func (p *columnsPrinter) PrintObj(obj runtime.Object, w io.Writer) error {
	tw := printers.GetNewTabWriter(w)
	if !p.noHeaders {
		fmt.Fprintln(tw, strings.Join(p.headers, "\t"))
	}
	var rows []map[string]any
	if list, ok := obj.(*unstructured.UnstructuredList); ok {
		for _, it := range list.Items {
			rows = append(rows, it.Object)
		}
	} else if u, ok := obj.(*unstructured.Unstructured); ok {
		rows = append(rows, u.Object)
	}
	for _, row := range rows {
		cells := make([]string, len(p.paths))
		for i, jp := range p.paths {
			results, err := jp.FindResults(row)
			if err != nil {
				return fmt.Errorf("column %s: %w", p.headers[i], err)
			}
			var values []string
			for _, r := range results {
				for _, v := range r {
					values = append(values, printers.EscapeTerminal(fmt.Sprint(v.Interface())))
				}
			}
			if len(values) == 0 {
				values = []string{"<none>"}
			}
			cells[i] = strings.Join(values, ",")
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// Print prints doc, a document with apiVersion and kind, in a format other
// than the tables; names are what -o name prints (kind/name, one a line).
func (o *output) Print(w io.Writer, doc any, names []string) error {
	if o.Format == outputName {
		for _, n := range names {
			if _, err := fmt.Fprintln(w, n); err != nil {
				return err
			}
		}
		return nil
	}
	obj, err := toObject(doc)
	if err != nil {
		return err
	}
	var p printers.ResourcePrinter
	if strings.HasPrefix(o.Format, "custom-columns") {
		p, err = o.customColumns()
	} else {
		p, err = o.printer()
	}
	if err != nil {
		return err
	}
	return p.PrintObj(obj, w)
}

// toObject makes an output document an object the printers take: a list
// when it has items (so that custom-columns prints a row per item).
func toObject(doc any) (runtime.Object, error) {
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	items, ok := m["items"].([]any)
	if !ok {
		return &unstructured.Unstructured{Object: m}, nil
	}
	delete(m, "items")
	list := &unstructured.UnstructuredList{Object: m, Items: []unstructured.Unstructured{}}
	for _, it := range items {
		obj, ok := it.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("an item of %v is not an object", m["kind"])
		}
		list.Items = append(list.Items, unstructured.Unstructured{Object: obj})
	}
	return list, nil
}

// relaxedPath parses a JSONPath as kubectl's custom-columns and --sort-by
// take it: with or without the braces and the leading dot.
func relaxedPath(name, path string) (*jsonpath.JSONPath, error) {
	expr := path
	if !strings.HasPrefix(expr, "{") {
		expr = "{" + expr + "}"
	}
	if !strings.HasPrefix(expr, "{.") {
		expr = "{." + expr[1:]
	}
	jp := jsonpath.New(name).AllowMissingKeys(true)
	if err := jp.Parse(expr); err != nil {
		return nil, fmt.Errorf("%s %s: %v", name, path, err)
	}
	return jp, nil
}

// sortRows sorts rows, stably, by the value of --sort-by in each as it is
// printed in JSON: numbers by value, anything else as text; a row without
// the value goes last.
func sortRows[T any](o *output, rows []T) error {
	if o.SortBy == "" || len(rows) < 2 {
		return nil
	}
	jp, err := relaxedPath("--sort-by", o.SortBy)
	if err != nil {
		return err
	}
	type keyed struct {
		row    T
		num    float64
		text   string
		isNum  bool
		absent bool
	}
	ks := make([]keyed, len(rows))
	for i, r := range rows {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		var m any
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		ks[i].row = r
		results, err := jp.FindResults(m)
		if err != nil {
			return fmt.Errorf("--sort-by %s: %w", o.SortBy, err)
		}
		if len(results) == 0 || len(results[0]) == 0 {
			ks[i].absent = true
			continue
		}
		switch v := results[0][0].Interface().(type) {
		case float64:
			ks[i].num, ks[i].isNum = v, true
		default:
			ks[i].text = fmt.Sprint(v)
		}
	}
	sort.SliceStable(ks, func(i, j int) bool {
		a, b := ks[i], ks[j]
		switch {
		case a.absent || b.absent:
			return !a.absent && b.absent
		case a.isNum && b.isNum:
			return a.num < b.num
		}
		return a.text < b.text
	})
	for i := range ks {
		rows[i] = ks[i].row
	}
	return nil
}

// printList sorts a list's rows (--sort-by) and, in a format other than the
// command's tables, prints the list with -o name naming each row's node; it
// reports whether it printed (false: the caller prints its table).
func printList[T any](out *output, w io.Writer, list any, rows []T, node func(T) string) (bool, error) {
	if err := sortRows(out, rows); err != nil {
		return true, err
	}
	if out.Table() {
		return false, nil
	}
	names := make([]string, len(rows))
	for i, r := range rows {
		names[i] = node(r)
	}
	return true, out.Print(w, list, nodeNames(names))
}
