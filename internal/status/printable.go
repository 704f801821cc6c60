package status

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/kustodian/kustodian/internal/lock"
)

// Printable is s with every character that could steer a terminal
// written out visibly: control characters (escape sequences, carriage
// returns, newlines, tabs), and the bidirectional and other invisible
// formatting characters that can make text read differently from what it
// is. Records are written by the agents; a compromised node writes what it
// likes, and kustodian-ctl must not pass it to an operator's terminal.
func Printable(s string) string {
	clean := true
	for _, r := range s {
		if unsafeRune(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == unicode.ReplacementChar:
			b.WriteString(`\ufffd`)
		case !unsafeRune(r):
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// unsafeRune: controls (C0, DEL, C1), format characters (Cf: bidi
// overrides, zero-width joiners), line and paragraph separators, and bytes
// that are not UTF-8 (decoded as the replacement character).
func unsafeRune(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) || r == unicode.ReplacementChar
}

// printable makes every text of the status that came from the cluster
// Printable.
func (s *MaintenanceStatus) printable() {
	s.PausedReason = Printable(s.PausedReason)
	for i := range s.Locks {
		l := &s.Locks[i]
		l.Name, l.Group, l.Holder = Printable(l.Name), Printable(l.Group), Printable(l.Holder)
	}
	if s.Kured != nil {
		for i, h := range s.Kured.Holders {
			s.Kured.Holders[i] = Printable(h)
		}
		s.Kured.Error = Printable(s.Kured.Error)
	}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		n.Name, n.State, n.Reason, n.Message = Printable(n.Name), lock.State(Printable(string(n.State))), Printable(n.Reason), Printable(n.Message)
		n.RequestID, n.Group, n.Policy, n.Blocked = Printable(n.RequestID), Printable(n.Group), Printable(n.Policy), Printable(n.Blocked)
		for j := range n.Gates {
			g := &n.Gates[j]
			g.Gate, g.Verdict, g.Reason = Printable(g.Gate), Printable(g.Verdict), Printable(g.Reason)
		}
	}
}
