package hostfiles

import (
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// Whatever a script writes into the request file, the reason read from it
// is one short line of valid UTF-8 without control characters, fit for a
// record's annotation and a terminal.
func FuzzRequestFile(f *testing.F) {
	for _, seed := range []string{"", "kernel 6.1.99\n", "  \x1b[31mred\x1b[0m \n2nd", strings.Repeat("ä", 150), "a" + strings.Repeat("ä", 150), "\xff\xfe bad utf-8"} {
		f.Add([]byte(seed))
	}
	files := testFiles(f)
	f.Fuzz(func(t *testing.T, content []byte) {
		if err := os.WriteFile(files.Request, content, 0o644); err != nil {
			t.Fatal(err)
		}
		o, err := files.Observe()
		if err != nil {
			t.Fatalf("Observe: %v", err)
		}
		if o.Request == nil {
			t.Fatal("no request seen")
		}
		r := o.Request.Reason
		if len(r) > maxReason || !utf8.ValidString(r) || strings.ContainsFunc(r, func(c rune) bool { return c < 0x20 || c == 0x7f }) {
			t.Fatalf("reason %q from %q: longer than %d bytes, invalid UTF-8, or with control characters", r, content, maxReason)
		}
	})
}
