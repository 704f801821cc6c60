package notify

import "github.com/kustodian/kustodian/internal/tmpl"

// Template is the message of one event: Go's template syntax over Data,
// evaluated by internal/tmpl (not text/template, which the agent does not
// link). What it may use is said there; its fields are Data's.
type Template = tmpl.Template[Data]

// lang is the notification templates' language.
var lang = tmpl.Lang[Data]{
	Kind: "notification template",
	Noun: "notification",
	Fields: map[string]func(Data) any{
		"Event":     func(d Data) any { return string(d.Event) },
		"Node":      func(d Data) any { return d.Node },
		"Reason":    func(d Data) any { return d.Reason },
		"Message":   func(d Data) any { return d.Message },
		"Group":     func(d Data) any { return d.Group },
		"Policy":    func(d Data) any { return d.Policy },
		"Time":      func(d Data) any { return d.Time },
		"Requested": func(d Data) any { return d.Requested },
		"Duration":  func(d Data) any { return d.Duration },
	},
	Sample: sample,
}

// ParseTemplate reads the template of an event, checks every part of it
// and tries it on sample data of that event down every branch.
func ParseTemplate(ev Event, text string) (*Template, error) {
	l := lang
	l.Sample.Event = ev
	return l.Parse(string(ev), text)
}
