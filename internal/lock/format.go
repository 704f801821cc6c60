package lock

import (
	"errors"
	"fmt"
	"strconv"

	coordv1 "k8s.io/api/coordination/v1"
)

// Format is the version of the protocol's Leases (records, locks and
// queue summaries) that this build writes and reads. It goes up only when
// a change would make an older agent misread a Lease: an agent then
// refuses a Lease in a newer format (FormatError) rather than act on it,
// and reads every older one. A Lease without a format is in format 1, the
// first (written by the agents released before formats were marked).
const Format = 1

// AnnotationFormat is a Lease's format (a decimal number).
const AnnotationFormat = "kustodian.io/format"

// FormatError says that a Lease is in a format newer than this build's,
// or not in one at all.
type FormatError struct {
	Namespace, Name string
	Value           string // the annotation as found
	Newer           int    // the format, when Value is a number
}

func (e *FormatError) Error() string {
	what := "Lease " + e.Namespace + "/" + e.Name
	if e.Newer == 0 {
		return fmt.Sprintf("%s: annotation %s is %q, not a format number; an admin or a newer agent wrote it: delete the annotation, or upgrade this node's kustodian", what, AnnotationFormat, e.Value)
	}
	return fmt.Sprintf("%s is in format %d of Kustodian's Leases; this agent reads formats up to %d: upgrade kustodian on this node (docs/agent.md, \"Upgrading the agents\")", what, e.Newer, Format)
}

// IsFormatError reports whether err is, or wraps, a *FormatError.
func IsFormatError(err error) bool {
	var fe *FormatError
	return errors.As(err, &fe)
}

// CheckFormat returns a *FormatError when l is in a format this build
// does not read.
func CheckFormat(l *coordv1.Lease) error {
	v, ok := l.Annotations[AnnotationFormat]
	if !ok {
		return nil
	}
	n, err := strconv.Atoi(v)
	switch {
	case err != nil || n < 1:
		return &FormatError{Namespace: l.Namespace, Name: l.Name, Value: v}
	case n > Format:
		return &FormatError{Namespace: l.Namespace, Name: l.Name, Value: v, Newer: n}
	}
	return nil
}

// MarkFormat stamps l with this build's format: a record and a queue
// summary at each write, a lock when it is created (a free lock is taken
// as it is).
func MarkFormat(l *coordv1.Lease) {
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[AnnotationFormat] = strconv.Itoa(Format)
}
