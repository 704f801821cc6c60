package notify

import (
	"bytes"
	"strings"
	"testing"
	"text/template"
	"time"
)

// The templates a notification may use render as text/template renders
// them: text/template, which the agent does not link, is the judge.
func TestTemplatesRenderAsTextTemplate(t *testing.T) {
	data := []Data{
		sample,
		{Event: Completed, Node: "w-1", Duration: 90 * time.Second, Time: time.Unix(1700000000, 0).UTC()},
		{Event: Blocked, Node: "w-2", Reason: "kernel 6.1", Message: "outside its window", Policy: "gpu", Group: "rack-a"},
	}
	for _, text := range []string{
		"",
		"plain text",
		DefaultTemplates[Started], DefaultTemplates[Completed], DefaultTemplates[Failed], DefaultTemplates[Blocked],
		"{{.Event}} {{.Node}} {{.Reason}} {{.Message}} {{.Group}} {{.Policy}} {{.Time}} {{.Requested}} {{.Duration}}",
		"{{with .Reason}}reason {{.}}{{else}}no reason{{end}}",
		"{{if .Policy}}policy {{.Policy}}{{else if .Group}}group {{.Group}}{{else}}default{{end}}",
		"{{if eq .Event \"failed\"}}ALERT {{end}}{{.Node}}",
		"{{if eq .Event \"blocked\" \"failed\"}}bad{{else}}good{{end}}",
		"{{if ne .Node \"w-1\"}}not w-1{{end}}",
		"{{if and .Reason .Message}}both{{end}}{{if or .Reason .Message}}one{{end}}{{if not .Reason}}none{{end}}",
		"{{.Node | printf \"%q\"}} {{printf \"%s took %v\" .Node .Duration}} {{print .Node 1 2}}",
		"{{len .Node}} {{if (eq (len .Reason) 0)}}empty{{end}}",
		"{{- /* a comment */ -}} {{.Node}}   {{- .Event -}}  !",
		"{{with .Duration}}{{.}}{{end}}{{with .}}{{.Node}}{{end}}",
		"{{if .Duration}}waited{{end}} {{if true}}t{{end}}{{if 0}}zero{{end}} {{if .Time}}time{{end}}",
		`{{printf "%.1f" 2.0}} {{printf "%v %v" 1e3 0x10}} {{if eq .Time .Time}}same{{end}}`,
		`{{if and .Policy (eq .Policy "gpu")}}gpu{{end}}{{if or .Reason (eq .Reason "x")}}r{{end}}`,
	} {
		tmpl, err := ParseTemplate(Failed, text)
		if err != nil {
			t.Errorf("%q: %v", text, err)
			continue
		}
		judge := template.Must(template.New("judge").Option("missingkey=error").Parse(text))
		for _, d := range data {
			var want bytes.Buffer
			if err := judge.Execute(&want, d); err != nil {
				t.Fatalf("the judge cannot render %q: %v", text, err)
			}
			got, err := tmpl.Render(d)
			if err != nil || got != want.String() {
				t.Errorf("%q on %+v: %q, %v; text/template says %q", text, d, got, err, want.String())
			}
		}
	}
}

// What Render does not know is refused when the agent starts, in every
// branch, naming the place in the template.
func TestTemplateRefusals(t *testing.T) {
	for text, want := range map[string]string{
		"{{.Nodename}}": "failed:1:2: can't evaluate field Nodename (a notification has .Duration .Event",
		"{{if .Node}}{{else}}{{.Nodename}}{{end}}":              "can't evaluate field Nodename",
		"{{with .Reason}}{{.Node}}{{end}}":                      "inside with, the dot is the value",
		"{{.Time.Format \"15:04\"}}":                            "fields of fields and methods are not supported",
		"{{range .Node}}x{{end}}":                               "is not supported in a notification template",
		"{{$x := .Node}}{{$x}}":                                 "variables are not supported",
		"{{define \"x\"}}y{{end}}{{template \"x\"}}":            "not supported",
		"{{upper .Node}}":                                       `function "upper" not defined`,
		"{{.Node 1}}":                                           "is a field, not a function",
		"{{.Node":                                               "unclosed action",
		"{{printf 1}}":                                          "printf: its first argument is the format",
		"{{if eq .Node 1}}x{{end}}":                             "cannot compare",
		"{{if .Policy}}{{not 1 2}}{{end}}":                      "not: takes 1 argument",
		"{{with .Reason}}x{{else}}{{len .Duration}}{{end}}":     "len: takes 1 text argument",
		`{{if eq .Event "blocked"}}{{printf .Duration}}{{end}}`: "printf: its first argument is the format",
		"{{. 1}}":              "is not a function",
		`{{"x" | .Node}}`:      "is a field, not a function",
		"{{eq .Duration 1e9}}": "cannot compare",
		"{{eq .Time 0}}":       "cannot compare",
		`{{printf "%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s" (printf "%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s" (printf "%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s" (printf "%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s" (printf "%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s" (printf "%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s%[1]s" .Node)))))}}`: "KiB",
	} {
		_, err := ParseTemplate(Failed, text)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one with %q", text, err, want)
		}
	}
}
