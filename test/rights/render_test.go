package rights

import (
	"os"
	"testing"
)

// docs/security.md holds the table as docs/security-rights.yaml has it:
// make docs renders it.
func TestSecurityDocRendersTheTable(t *testing.T) {
	b, err := os.ReadFile("../../docs/security-rights.yaml")
	if err != nil {
		t.Fatal(err)
	}
	table, err := ReadTable(b)
	if err != nil {
		t.Fatalf("docs/security-rights.yaml: %v", err)
	}
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	want, err := Splice(string(doc), Render(table))
	if err != nil {
		t.Fatalf("docs/security.md: %v", err)
	}
	if want != string(doc) {
		t.Errorf("docs/security.md does not hold the table of docs/security-rights.yaml: run make docs")
	}
}
