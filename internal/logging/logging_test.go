package logging

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestDurationsAreText(t *testing.T) {
	for _, format := range []string{"json", "text"} {
		var b bytes.Buffer
		New(&b, format).WithGroup("drain").Info("drained", "took", 90*time.Second)
		if !strings.Contains(b.String(), "1m30s") || strings.Contains(b.String(), "90000000000") {
			t.Errorf("%s: %s", format, b.String())
		}
	}
}
